/* SPDX-License-Identifier: MIT */
/* The session's cumulative profile (cumul.h).
 *
 * Every table interns a key of bytes: a string's bytes, or for the other
 * tables a row of uint64 words that holds every field of the record with
 * its references already renumbered into this profile (string indices,
 * mapping, function and location ids). A record's id is its index + 1; the
 * string "" is index 0, as pprof wants. The key is all the encoder needs. */
#include "cumul.h"

#include <stdbool.h>
#include <string.h>

#include "../hash.h"
#include "../index.h"
#include "arena.h"
#include "profile.pb-c.h"

typedef struct {
    uint64_t hash;
    const uint64_t *key; /* for strings: the bytes, NUL-terminated */
    size_t len;          /* bytes */
} ent;

/* ents[0 .. n) in ix; the entries, the keys and the index's slots live
 * in the arena the table is interned into. */
typedef struct {
    mp_index ix;
    ent *ents;
    size_t n, ents_cap;
} tab;

enum { MAX_TYPES = 16, MAX_WORDS = 4096 };

static struct {
    mpc_arena arena; /* everything below */
    bool have;       /* a report was merged */
    tab str, map, fn, loc, smp;
    size_t ntypes;
    int64_t type[MAX_TYPES], unit[MAX_TYPES];
    bool inuse[MAX_TYPES]; /* replaced by each report, not summed */
    int64_t *vals;         /* smp.n * ntypes */
    size_t vals_cap;       /* samples */
    int64_t period_type, period_unit, period;
    int64_t *comments;
    size_t ncomments;
    int64_t start_ns;
    unsigned epoch; /* sessions so far */
} g;

static bool grow(mpc_arena *a, void **arr, size_t *cap, size_t elem, size_t want)
{
    if (want <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 256;
    while (ncap < want)
        ncap *= 2;
    void *n = mpc_arena_alloc(a, ncap * elem);
    if (n == NULL)
        return false;
    if (*arr != NULL)
        memcpy(n, *arr, *cap * elem);
    *arr = n;
    *cap = ncap;
    return true;
}

static void *arena_zalloc(void *arena, size_t bytes)
{
    void *p = mpc_arena_alloc(arena, bytes);
    if (p != NULL)
        memset(p, 0, bytes);
    return p;
}

/* Slots from an arena; the old ones stay there until it is freed. */
static const mp_index_mem arena_mem = {arena_zalloc, NULL};

/* Looks `key` (hash h) up in `t`: true with its index in *i, or false
 * with *p standing where it goes. */
static bool lookup(const tab *t, const void *key, size_t len, uint64_t h, mp_index_probe *p,
                   uint32_t *i)
{
    *p = mp_index_start(&t->ix, h);
    while (mp_index_next(p, i)) {
        const ent *e = &t->ents[*i];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return true;
    }
    return false;
}

/* The index of `key` in `t`, or -1. */
static int64_t find(const tab *t, const void *key, size_t len)
{
    mp_index_probe p;
    uint32_t i;
    return lookup(t, key, len, mp_hash_bytes(key, len), &p, &i) ? (int64_t)i : -1;
}

/* The index of `key` in `t` (interned on first sight, copied into `a`);
 * -1 when out of memory. */
static int64_t intern(tab *t, mpc_arena *a, const void *key, size_t len)
{
    t->ix.mem = &arena_mem; /* the slots too stay out of the sampled malloc */
    t->ix.mem_ctx = a;
    if (!mp_index_reserve(&t->ix))
        return -1;
    uint64_t h = mp_hash_bytes(key, len);
    mp_index_probe p;
    uint32_t i;
    if (lookup(t, key, len, h, &p, &i))
        return i;
    if (!grow(a, (void **)&t->ents, &t->ents_cap, sizeof(ent), t->n + 1))
        return -1;
    uint64_t *copy = mpc_arena_alloc(a, len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, key, len);
    ((char *)copy)[len] = '\0';
    t->ents[t->n] = (ent){.hash = h, .key = copy, .len = len};
    mp_index_put(&t->ix, &p, (uint32_t)t->n);
    return (int64_t)t->n++;
}

void mpc_cumul_reset(int64_t start_ns)
{
    unsigned epoch = g.epoch + 1;
    mpc_arena_free(&g.arena);
    memset(&g, 0, sizeof g);
    g.start_ns = start_ns;
    g.epoch = epoch;
    intern(&g.str, &g.arena, "", 0); /* index 0 */
}

/* ---- merging ------------------------------------------------------- */

static void *pb_alloc(void *data, size_t size) { return mpc_arena_alloc(data, size); }
static void pb_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

/* A report's ids (arbitrary uint64) to this profile's: interned in a
 * scratch table whose index is the position of a parallel array. */
typedef struct {
    tab t;
    uint64_t *to;
    size_t cap;
} idmap;

static bool idmap_put(idmap *m, mpc_arena *a, uint64_t id, uint64_t to)
{
    int64_t i = intern(&m->t, a, &id, sizeof id);
    if (i < 0 || !grow(a, (void **)&m->to, &m->cap, sizeof(uint64_t), (size_t)i + 1))
        return false;
    m->to[i] = to;
    return true;
}

static uint64_t idmap_get(const idmap *m, uint64_t id)
{
    int64_t i = find(&m->t, &id, sizeof id);
    return i < 0 ? 0 : m->to[i]; /* a dangling id: pprof's "none" */
}

/* The string of report index `i`, renumbered (0 when out of range). */
static int64_t rs(const int64_t *smap, size_t n, int64_t i)
{
    return i >= 0 && (size_t)i < n ? smap[i] : 0;
}

static int merge(Perftools__Profiles__Profile *p, mpc_arena *s)
{
    size_t ns = p->n_string_table;
    int64_t *smap = mpc_arena_alloc(s, (ns + 1) * sizeof *smap);
    if (smap == NULL)
        return -1;
    for (size_t i = 0; i < ns; i++) {
        const char *str = p->string_table[i] != NULL ? p->string_table[i] : "";
        if ((smap[i] = intern(&g.str, &g.arena, str, strlen(str))) < 0)
            return -1;
    }
    if (p->n_sample_type == 0 || p->n_sample_type > MAX_TYPES)
        return -1;
    if (!g.have) {
        g.ntypes = p->n_sample_type;
        for (size_t t = 0; t < g.ntypes; t++) {
            g.type[t] = rs(smap, ns, p->sample_type[t]->type);
            g.unit[t] = rs(smap, ns, p->sample_type[t]->unit);
            g.inuse[t] = strncmp((const char *)g.str.ents[g.type[t]].key, "inuse", 5) == 0;
        }
    } else if (p->n_sample_type != g.ntypes) {
        return -1;
    }
    uint64_t w[MAX_WORDS];
    idmap maps = {0}, fns = {0}, locs = {0};
    for (size_t i = 0; i < p->n_mapping; i++) {
        const Perftools__Profiles__Mapping *m = p->mapping[i];
        uint64_t k[6] = {m->memory_start,
                         m->memory_limit,
                         m->file_offset,
                         (uint64_t)rs(smap, ns, m->filename),
                         (uint64_t)rs(smap, ns, m->build_id),
                         (uint64_t)(m->has_functions | m->has_filenames << 1 |
                                    m->has_line_numbers << 2 | m->has_inline_frames << 3)};
        int64_t id = intern(&g.map, &g.arena, k, sizeof k);
        if (id < 0 || !idmap_put(&maps, s, m->id, (uint64_t)id + 1))
            return -1;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        uint64_t k[4] = {(uint64_t)rs(smap, ns, f->name), (uint64_t)rs(smap, ns, f->system_name),
                         (uint64_t)rs(smap, ns, f->filename), (uint64_t)f->start_line};
        int64_t id = intern(&g.fn, &g.arena, k, sizeof k);
        if (id < 0 || !idmap_put(&fns, s, f->id, (uint64_t)id + 1))
            return -1;
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (4 + 2 * l->n_line > MAX_WORDS)
            return -1;
        size_t n = 0;
        w[n++] = idmap_get(&maps, l->mapping_id);
        w[n++] = l->address;
        w[n++] = l->is_folded;
        w[n++] = l->n_line;
        for (size_t j = 0; j < l->n_line; j++) {
            w[n++] = idmap_get(&fns, l->line[j]->function_id);
            w[n++] = (uint64_t)l->line[j]->line;
        }
        int64_t id = intern(&g.loc, &g.arena, w, n * sizeof *w);
        if (id < 0 || !idmap_put(&locs, s, l->id, (uint64_t)id + 1))
            return -1;
    }
    /* inuse_* is the newest report's: the older values go. */
    for (size_t i = 0; i < g.smp.n; i++)
        for (size_t t = 0; t < g.ntypes; t++)
            if (g.inuse[t])
                g.vals[i * g.ntypes + t] = 0;
    int64_t delta = intern(&g.str, &g.arena, "__delta__", 9);
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *sm = p->sample[i];
        if (sm->n_value != g.ntypes || 2 + sm->n_location_id + 4 * sm->n_label > MAX_WORDS)
            continue;
        size_t n = 0;
        w[n++] = sm->n_location_id;
        for (size_t j = 0; j < sm->n_location_id; j++)
            w[n++] = idmap_get(&locs, sm->location_id[j]);
        size_t nl = n++;
        w[nl] = 0;
        for (size_t j = 0; j < sm->n_label; j++) {
            const Perftools__Profiles__Label *lb = sm->label[j];
            int64_t key = rs(smap, ns, lb->key);
            if (key == delta)
                continue; /* pull scrapers compute deltas themselves */
            w[n++] = (uint64_t)key;
            w[n++] = (uint64_t)rs(smap, ns, lb->str);
            w[n++] = (uint64_t)lb->num;
            w[n++] = (uint64_t)rs(smap, ns, lb->num_unit);
            w[nl]++;
        }
        int64_t id = intern(&g.smp, &g.arena, w, n * sizeof *w);
        if (id < 0)
            return -1;
        size_t before = g.vals_cap;
        if (!grow(&g.arena, (void **)&g.vals, &g.vals_cap, g.ntypes * sizeof(int64_t),
                  (size_t)id + 1))
            return -1;
        if (g.vals_cap != before) /* grow() copied the old rows only */
            memset(g.vals + before * g.ntypes, 0,
                   (g.vals_cap - before) * g.ntypes * sizeof(int64_t));
        for (size_t t = 0; t < g.ntypes; t++)
            g.vals[(size_t)id * g.ntypes + t] += sm->value[t];
    }
    if (p->period_type != NULL) {
        g.period_type = rs(smap, ns, p->period_type->type);
        g.period_unit = rs(smap, ns, p->period_type->unit);
    }
    g.period = p->period;
    g.comments = mpc_arena_alloc(&g.arena, (p->n_comment + 1) * sizeof *g.comments);
    g.ncomments = 0;
    for (size_t i = 0; g.comments != NULL && i < p->n_comment; i++)
        g.comments[g.ncomments++] = rs(smap, ns, p->comment[i]);
    g.have = true;
    return 0;
}

int mpc_cumul_add(const uint8_t *pprof, size_t len)
{
    mpc_arena scratch = {0};
    ProtobufCAllocator al = {.alloc = pb_alloc, .free = pb_free, .allocator_data = &scratch};
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(&al, len, pprof);
    int rc = p != NULL ? merge(p, &scratch) : -1;
    mpc_arena_free(&scratch);
    return rc;
}

/* ---- encoding ------------------------------------------------------ */

#define NEW(s, T) ((T *)mpc_arena_alloc((s), sizeof(T)))

static Perftools__Profiles__ValueType *vt(mpc_arena *s, int64_t type, int64_t unit)
{
    Perftools__Profiles__ValueType *v = NEW(s, Perftools__Profiles__ValueType);
    if (v != NULL) {
        perftools__profiles__value_type__init(v);
        v->type = type;
        v->unit = unit;
    }
    return v;
}

static int build(Perftools__Profiles__Profile *p, mpc_arena *s, const char *dflt, int64_t now_ns,
                 const mpc_cumul_mark *since)
{
    perftools__profiles__profile__init(p);
    int64_t d = intern(&g.str, &g.arena, dflt, strlen(dflt));
    if (d < 0)
        return -1;
    p->default_sample_type = d;
    p->n_sample_type = g.ntypes;
    p->sample_type = mpc_arena_alloc(s, g.ntypes * sizeof *p->sample_type);
    if (p->sample_type == NULL)
        return -1;
    for (size_t t = 0; t < g.ntypes; t++)
        if ((p->sample_type[t] = vt(s, g.type[t], g.unit[t])) == NULL)
            return -1;
    p->n_string_table = g.str.n;
    p->string_table = mpc_arena_alloc(s, g.str.n * sizeof(char *));
    p->mapping = mpc_arena_alloc(s, (g.map.n + 1) * sizeof *p->mapping);
    p->function = mpc_arena_alloc(s, (g.fn.n + 1) * sizeof *p->function);
    p->location = mpc_arena_alloc(s, (g.loc.n + 1) * sizeof *p->location);
    p->sample = mpc_arena_alloc(s, (g.smp.n + 1) * sizeof *p->sample);
    if (!p->string_table || !p->mapping || !p->function || !p->location || !p->sample)
        return -1;
    for (size_t i = 0; i < g.str.n; i++)
        p->string_table[i] = (char *)g.str.ents[i].key;
    for (size_t i = 0; i < g.map.n; i++) {
        const uint64_t *k = g.map.ents[i].key;
        Perftools__Profiles__Mapping *m = NEW(s, Perftools__Profiles__Mapping);
        if (m == NULL)
            return -1;
        perftools__profiles__mapping__init(m);
        m->id = i + 1;
        m->memory_start = k[0];
        m->memory_limit = k[1];
        m->file_offset = k[2];
        m->filename = (int64_t)k[3];
        m->build_id = (int64_t)k[4];
        m->has_functions = k[5] & 1;
        m->has_filenames = (k[5] >> 1) & 1;
        m->has_line_numbers = (k[5] >> 2) & 1;
        m->has_inline_frames = (k[5] >> 3) & 1;
        p->mapping[p->n_mapping++] = m;
    }
    for (size_t i = 0; i < g.fn.n; i++) {
        const uint64_t *k = g.fn.ents[i].key;
        Perftools__Profiles__Function *f = NEW(s, Perftools__Profiles__Function);
        if (f == NULL)
            return -1;
        perftools__profiles__function__init(f);
        f->id = i + 1;
        f->name = (int64_t)k[0];
        f->system_name = (int64_t)k[1];
        f->filename = (int64_t)k[2];
        f->start_line = (int64_t)k[3];
        p->function[p->n_function++] = f;
    }
    for (size_t i = 0; i < g.loc.n; i++) {
        const uint64_t *k = g.loc.ents[i].key;
        Perftools__Profiles__Location *l = NEW(s, Perftools__Profiles__Location);
        if (l == NULL)
            return -1;
        perftools__profiles__location__init(l);
        l->id = i + 1;
        l->mapping_id = k[0];
        l->address = k[1];
        l->is_folded = k[2] != 0;
        l->n_line = k[3];
        l->line = mpc_arena_alloc(s, (l->n_line + 1) * sizeof *l->line);
        if (l->line == NULL)
            return -1;
        for (size_t j = 0; j < l->n_line; j++) {
            Perftools__Profiles__Line *ln = NEW(s, Perftools__Profiles__Line);
            if (ln == NULL)
                return -1;
            perftools__profiles__line__init(ln);
            ln->function_id = k[4 + 2 * j];
            ln->line = (int64_t)k[5 + 2 * j];
            l->line[j] = ln;
        }
        p->location[p->n_location++] = l;
    }
    for (size_t i = 0; i < g.smp.n; i++) {
        const int64_t *v = g.vals + i * g.ntypes;
        if (since != NULL && since->ntypes == g.ntypes) {
            int64_t *d = mpc_arena_alloc(s, g.ntypes * sizeof *d);
            if (d == NULL)
                return -1;
            for (size_t t = 0; t < g.ntypes; t++)
                d[t] = v[t] - (i < since->rows ? since->vals[i * g.ntypes + t] : 0);
            v = d;
        }
        bool any = false;
        for (size_t t = 0; t < g.ntypes; t++)
            any |= v[t] != 0;
        if (!any)
            continue; /* freed since, and nothing allocated there this session */
        const uint64_t *k = g.smp.ents[i].key;
        Perftools__Profiles__Sample *sm = NEW(s, Perftools__Profiles__Sample);
        if (sm == NULL)
            return -1;
        perftools__profiles__sample__init(sm);
        sm->n_location_id = k[0];
        sm->location_id = (uint64_t *)(k + 1);
        sm->n_value = g.ntypes;
        sm->value = (int64_t *)v;
        const uint64_t *lk = k + 1 + k[0];
        sm->n_label = lk[0];
        sm->label = mpc_arena_alloc(s, (sm->n_label + 1) * sizeof *sm->label);
        if (sm->label == NULL)
            return -1;
        for (size_t j = 0; j < sm->n_label; j++) {
            Perftools__Profiles__Label *lb = NEW(s, Perftools__Profiles__Label);
            if (lb == NULL)
                return -1;
            perftools__profiles__label__init(lb);
            lb->key = (int64_t)lk[1 + 4 * j];
            lb->str = (int64_t)lk[2 + 4 * j];
            lb->num = (int64_t)lk[3 + 4 * j];
            lb->num_unit = (int64_t)lk[4 + 4 * j];
            sm->label[j] = lb;
        }
        p->sample[p->n_sample++] = sm;
    }
    p->period_type = vt(s, g.period_type, g.period_unit);
    p->period = g.period;
    p->n_comment = g.ncomments;
    p->comment = g.comments;
    p->time_nanos = now_ns;
    p->duration_nanos = now_ns - (since != NULL ? since->ns : g.start_ns);
    return p->period_type != NULL ? 0 : -1;
}

int mpc_cumul_mark_take(mpc_cumul_mark *m, int64_t now_ns)
{
    memset(m, 0, sizeof *m);
    if (!g.have)
        return -1;
    m->rows = g.smp.n;
    m->ntypes = g.ntypes;
    m->bytes = m->rows * m->ntypes * sizeof(int64_t) + 1;
    m->ns = now_ns;
    m->epoch = g.epoch;
    m->vals = mpc_map(m->bytes);
    if (m->vals == NULL)
        return -1;
    if (m->rows > 0)
        memcpy(m->vals, g.vals, m->bytes - 1);
    return 0;
}

void mpc_cumul_mark_free(mpc_cumul_mark *m)
{
    mpc_unmap(m->vals, m->bytes);
    memset(m, 0, sizeof *m);
}

int mpc_cumul_encode(const char *dflt, int64_t now_ns, const mpc_cumul_mark *since, uint8_t **out,
                     size_t *len)
{
    if (!g.have || (since != NULL && since->epoch != g.epoch))
        return -1;
    mpc_arena scratch = {0};
    Perftools__Profiles__Profile p;
    int rc = build(&p, &scratch, dflt, now_ns, since);
    if (rc == 0) {
        size_t n = perftools__profiles__profile__get_packed_size(&p);
        uint8_t *buf = mpc_map(n > 0 ? n : 1);
        if (buf == NULL) {
            rc = -1;
        } else {
            *len = perftools__profiles__profile__pack(&p, buf);
            *out = buf;
        }
    }
    mpc_arena_free(&scratch);
    return rc;
}
