/* The report side: aggregated samples -> pprof (report_builder.h).
 *
 * Location addresses: the recorder hands return addresses; a Location's
 * address is that return address minus one, i.e. inside the call
 * instruction (profile.proto allows it for non-leaf frames), so that
 * symbolization here and on a server names the line of the call. Every
 * frame handed to the builder is a call site (the profiler's frames are
 * cut before), so the adjustment applies to all of them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../report_builder.h"
#include "maps.h"
#include "profile.pb-c.h"
#include "quality.h"
#include "report_internal.h"
#include "symbols.h"

struct mp_report_cache {
    mp_maps maps;
    mp_syms *syms;
    size_t budget;
    uint64_t seen_unloads;
    int last_quality;
};

static void on_drop(mp_obj *o, void *arg) { mp_syms_forget_obj(arg, o); }

mp_report_cache *mp_report_cache_new(void)
{
    mp_report_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->syms = mp_syms_new();
    if (c->syms == NULL) {
        free(c);
        return NULL;
    }
    mp_maps_init(&c->maps);
    c->maps.on_drop = on_drop;
    c->maps.on_drop_arg = c->syms;
    c->budget = MP_REPORT_SYMBOL_BUDGET;
    c->last_quality = -1;
    return c;
}

void mp_report_cache_free(mp_report_cache *c)
{
    if (c == NULL)
        return;
    mp_maps_destroy(&c->maps);
    mp_syms_free(c->syms);
    free(c);
}

size_t mp_report_cache_symbol_bytes(const mp_report_cache *c)
{
    return c == NULL ? 0 : mp_syms_bytes(c->syms);
}

int mp_report_cache_last_quality(const mp_report_cache *c)
{
    return c == NULL ? -1 : c->last_quality;
}

void mp_report_cache_set_budget(mp_report_cache *c, size_t bytes) { c->budget = bytes; }

mp_maps *mp_report_cache_maps(mp_report_cache *c) { return &c->maps; }

bool mp_report_cache_refresh(mp_report_cache *c)
{
    bool ok = mp_maps_refresh(&c->maps);
    if (c->maps.unloads != c->seen_unloads) {
        /* Addresses of an unloaded object may now mean something else. */
        mp_syms_clear_addresses(c->syms);
        c->seen_unloads = c->maps.unloads;
    }
    return ok;
}

/* ---- the builder ---- */

#define NO_LOC UINT32_MAX

struct loc_slot {
    uintptr_t pc;
    uint32_t idx; /* location index + 1; 0 = empty */
};

typedef struct bsample {
    uint64_t hash;
    size_t off;     /* into stk */
    uint32_t depth; /* locations, the marker included */
    bool interval;
    double v[MP_VAL_COUNT];
} bsample;

struct mp_report_builder {
    mp_report_cache *c;
    mp_report_options opt;
    uintptr_t *loc_pc; /* per location: the return address (0 = the marker) */
    size_t nloc, loc_cap;
    struct loc_slot *loc_tab; /* open addressing on pc */
    size_t loc_tab_cap;
    uint32_t marker; /* location index of "[truncated]", NO_LOC until used */
    uint32_t *stk;
    size_t nstk, stk_cap;
    bsample *smp;
    size_t nsmp, smp_cap;
    uint64_t *smp_tab; /* open addressing: (hash high 32 bits << 32) | (sample index + 1) */
    size_t smp_tab_cap;
    char **comments; /* the profile's comments, in order (mp_report_comment) */
    size_t ncomments, comments_cap;
};

static size_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (size_t)x;
}

static bool reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (q == NULL)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

mp_report_builder *mp_report_begin(mp_report_cache *cache, const mp_report_options *opt)
{
    if (cache == NULL || opt == NULL)
        return NULL;
    mp_syms_trim(cache->syms, &cache->maps, cache->budget);
    mp_report_cache_refresh(cache); /* a failed refresh keeps the last list */
    mp_report_builder *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->c = cache;
    b->opt = *opt;
    b->marker = NO_LOC;
    return b;
}

void mp_report_abort(mp_report_builder *b)
{
    if (b == NULL)
        return;
    free(b->loc_pc);
    free(b->loc_tab);
    free(b->stk);
    free(b->smp);
    free(b->smp_tab);
    for (size_t i = 0; i < b->ncomments; i++)
        free(b->comments[i]);
    free(b->comments);
    free(b);
}

mp_prof_status mp_report_comment(mp_report_builder *b, const char *text)
{
    if (b == NULL || text == NULL)
        return MP_PROF_E_INTERNAL;
    char *c = strdup(text);
    if (c == NULL || !reserve((void **)&b->comments, &b->comments_cap, b->ncomments + 1,
                              sizeof *b->comments)) {
        free(c);
        return MP_PROF_E_NOMEM;
    }
    b->comments[b->ncomments++] = c;
    return MP_PROF_OK;
}

static bool grow_loc_tab(mp_report_builder *b)
{
    size_t nc = b->loc_tab_cap ? b->loc_tab_cap * 2 : 1024;
    struct loc_slot *t = calloc(nc, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < b->loc_tab_cap; i++) {
        if (b->loc_tab[i].idx == 0)
            continue;
        size_t j = mix(b->loc_tab[i].pc) & (nc - 1);
        while (t[j].idx)
            j = (j + 1) & (nc - 1);
        t[j] = b->loc_tab[i];
    }
    free(b->loc_tab);
    b->loc_tab = t;
    b->loc_tab_cap = nc;
    return true;
}

static uint32_t new_loc(mp_report_builder *b, uintptr_t pc)
{
    if (b->nloc >= NO_LOC - 1 ||
        !reserve((void **)&b->loc_pc, &b->loc_cap, b->nloc + 1, sizeof *b->loc_pc))
        return NO_LOC;
    b->loc_pc[b->nloc] = pc;
    return (uint32_t)b->nloc++;
}

static uint32_t loc_of(mp_report_builder *b, uintptr_t pc)
{
    if ((b->nloc + 1) * 2 > b->loc_tab_cap && !grow_loc_tab(b))
        return NO_LOC;
    size_t j = mix(pc) & (b->loc_tab_cap - 1);
    while (b->loc_tab[j].idx) {
        if (b->loc_tab[j].pc == pc)
            return b->loc_tab[j].idx - 1;
        j = (j + 1) & (b->loc_tab_cap - 1);
    }
    uint32_t i = new_loc(b, pc);
    if (i != NO_LOC) {
        b->loc_tab[j].pc = pc;
        b->loc_tab[j].idx = i + 1;
    }
    return i;
}

static bool grow_smp_tab(mp_report_builder *b)
{
    size_t nc = b->smp_tab_cap ? b->smp_tab_cap * 2 : 1024;
    uint64_t *t = calloc(nc, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < b->smp_tab_cap; i++) {
        uint64_t e = b->smp_tab[i];
        if (e == 0)
            continue;
        size_t j = (size_t)(e >> 32) & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = e;
    }
    free(b->smp_tab);
    b->smp_tab = t;
    b->smp_tab_cap = nc;
    return true;
}

mp_prof_status mp_report_add(mp_report_builder *b, const uintptr_t *pcs, size_t depth,
                             bool truncated, const double values[MP_VAL_COUNT], bool interval)
{
    if (b == NULL || values == NULL || (pcs == NULL && depth > 0) || depth > UINT32_MAX - 1)
        return MP_PROF_E_INTERNAL;
    size_t n = depth + (truncated ? 1 : 0);
    if (b->nsmp >= UINT32_MAX - 1 ||
        !reserve((void **)&b->stk, &b->stk_cap, b->nstk + n + 1, sizeof *b->stk) ||
        ((b->nsmp + 1) * 2 > b->smp_tab_cap && !grow_smp_tab(b)))
        return MP_PROF_E_NOMEM;
    uint32_t *s = b->stk + b->nstk;
    uint64_t h = 1469598103934665603ull ^ (interval ? 0x9e37u : 0x7f4au);
    for (size_t i = 0; i < depth; i++) {
        uint32_t l = loc_of(b, pcs[i]);
        if (l == NO_LOC)
            return MP_PROF_E_NOMEM;
        s[i] = l;
        h = (h ^ l) * 1099511628211ull;
    }
    if (truncated) {
        if (b->marker == NO_LOC) {
            b->marker = new_loc(b, 0);
            if (b->marker == NO_LOC)
                return MP_PROF_E_NOMEM;
        }
        s[depth] = b->marker;
        h = (h ^ b->marker) * 1099511628211ull;
    }
    h = mix(h ^ n);
    uint64_t tag = h & 0xffffffff00000000ull; /* also the slot: rehash needs no sample */
    size_t j = (size_t)(h >> 32) & (b->smp_tab_cap - 1);
    while (b->smp_tab[j]) {
        uint64_t e = b->smp_tab[j];
        bsample *o = &b->smp[(uint32_t)e - 1];
        if ((e & 0xffffffff00000000ull) == tag && o->hash == h && o->depth == n &&
            o->interval == interval && memcmp(b->stk + o->off, s, n * sizeof *s) == 0) {
            for (int k = 0; k < MP_VAL_COUNT; k++)
                o->v[k] += values[k];
            return MP_PROF_OK;
        }
        j = (j + 1) & (b->smp_tab_cap - 1);
    }
    if (!reserve((void **)&b->smp, &b->smp_cap, b->nsmp + 1, sizeof *b->smp))
        return MP_PROF_E_NOMEM;
    bsample *o = &b->smp[b->nsmp];
    o->hash = h;
    o->off = b->nstk;
    o->depth = (uint32_t)n;
    o->interval = interval;
    memcpy(o->v, values, sizeof o->v);
    b->smp_tab[j] = tag | (uint32_t)++b->nsmp;
    b->nstk += n;
    return MP_PROF_OK;
}

/* ---- encoding ---- */

/* The profile's string table: content -> index. */
typedef struct strtab {
    char **v;
    size_t n, cap;
    uint32_t *tab;
    size_t tab_cap;
} strtab;

static uint64_t hash_s(const char *p)
{
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool st_grow(strtab *t)
{
    size_t nc = t->tab_cap ? t->tab_cap * 2 : 256;
    uint32_t *n = calloc(nc, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = hash_s(t->v[i]) & (nc - 1);
        while (n[j])
            j = (j + 1) & (nc - 1);
        n[j] = (uint32_t)i + 1;
    }
    free(t->tab);
    t->tab = n;
    t->tab_cap = nc;
    return true;
}

/* Index of `s` (NULL = ""); -1 on out-of-memory. The table keeps the
 * pointer: `s` must outlive the encoding. */
static int64_t st_idx(strtab *t, const char *s)
{
    if (s == NULL)
        s = "";
    if ((t->n + 1) * 2 > t->tab_cap && !st_grow(t))
        return -1;
    size_t j = hash_s(s) & (t->tab_cap - 1);
    while (t->tab[j]) {
        if (strcmp(t->v[t->tab[j] - 1], s) == 0)
            return t->tab[j] - 1;
        j = (j + 1) & (t->tab_cap - 1);
    }
    if (!reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return -1;
    t->v[t->n] = (char *)s;
    t->tab[j] = (uint32_t)++t->n;
    return (int64_t)t->n - 1;
}

static int64_t round_value(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    if (v <= -9.2e18)
        return INT64_MIN;
    return (int64_t)llround(v);
}

/* Functions: (name, system name, file) string indices -> id. name is
 * the human name and system_name the linkage name (the same index for C
 * names), so the overloads a human name covers stay distinct functions. */
typedef struct fntab {
    Perftools__Profiles__Function *v;
    size_t n, cap;
    uint32_t *tab;
    size_t tab_cap;
} fntab;

static uint64_t fn_key(int64_t name, int64_t sys, int64_t file)
{
    return ((uint64_t)name << 32) ^ ((uint64_t)sys * 0x9E3779B97F4A7C15ull) ^ (uint64_t)file;
}

static bool fn_grow(fntab *t)
{
    size_t nc = t->tab_cap ? t->tab_cap * 2 : 256;
    uint32_t *n = calloc(nc, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = mix(fn_key(t->v[i].name, t->v[i].system_name, t->v[i].filename)) & (nc - 1);
        while (n[j])
            j = (j + 1) & (nc - 1);
        n[j] = (uint32_t)i + 1;
    }
    free(t->tab);
    t->tab = n;
    t->tab_cap = nc;
    return true;
}

/* Function id (>= 1) for (name, sys, file); 0 on out-of-memory. */
static uint64_t fn_id(fntab *t, int64_t name, int64_t sys, int64_t file)
{
    if ((t->n + 1) * 2 > t->tab_cap && !fn_grow(t))
        return 0;
    size_t j = mix(fn_key(name, sys, file)) & (t->tab_cap - 1);
    while (t->tab[j]) {
        Perftools__Profiles__Function *f = &t->v[t->tab[j] - 1];
        if (f->name == name && f->system_name == sys && f->filename == file)
            return f->id;
        j = (j + 1) & (t->tab_cap - 1);
    }
    if (!reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return 0;
    Perftools__Profiles__Function init = PERFTOOLS__PROFILES__FUNCTION__INIT;
    Perftools__Profiles__Function *f = &t->v[t->n];
    *f = init;
    f->id = t->n + 1;
    f->name = name;
    f->system_name = sys;
    f->filename = file;
    t->tab[j] = (uint32_t)++t->n;
    return f->id;
}

typedef struct mapflags {
    size_t locations;
    bool fn, file, line, inl;
} mapflags;

mp_prof_status mp_report_finish(mp_report_builder *b, uint8_t **out, size_t *len)
{
    if (b == NULL || out == NULL || len == NULL) {
        mp_report_abort(b);
        return MP_PROF_E_INTERNAL;
    }
    mp_report_cache *c = b->c;
    mp_maps *maps = &c->maps;
    mp_prof_symbolize mode = b->opt.symbolize;
    if (mode == MP_PROF_SYMBOLIZE_LINES && !mp_syms_have_lines())
        mode = MP_PROF_SYMBOLIZE_FUNCTIONS;

    mp_prof_status st = MP_PROF_E_NOMEM;
    strtab strs = {0};
    fntab fns = {0};
    int64_t *comment_idx = NULL;
    size_t nmap = mp_maps_count(maps);
    const mp_pcinfo **info = calloc(b->nloc ? b->nloc : 1, sizeof *info);
    uint32_t *loc_map = calloc(b->nloc ? b->nloc : 1, sizeof *loc_map);
    mapflags *mf = calloc(nmap ? nmap : 1, sizeof *mf);
    Perftools__Profiles__Location *locs = calloc(b->nloc ? b->nloc : 1, sizeof *locs);
    Perftools__Profiles__Location **locp = calloc(b->nloc ? b->nloc : 1, sizeof *locp);
    Perftools__Profiles__Line *lines = NULL, **linep = NULL;
    Perftools__Profiles__Sample *smp = calloc(b->nsmp ? b->nsmp : 1, sizeof *smp);
    Perftools__Profiles__Sample **smpp = calloc(b->nsmp ? b->nsmp : 1, sizeof *smpp);
    uint64_t *locids = calloc(b->nstk ? b->nstk : 1, sizeof *locids);
    int64_t *vals = calloc(b->nsmp ? b->nsmp * MP_VAL_COUNT : 1, sizeof *vals);
    Perftools__Profiles__Mapping *maparr = calloc(nmap ? nmap : 1, sizeof *maparr);
    Perftools__Profiles__Mapping **mapp = calloc(nmap ? nmap : 1, sizeof *mapp);
    Perftools__Profiles__Function **fnp = NULL;
    uint8_t *buf = NULL;
    if (!info || !loc_map || !mf || !locs || !locp || !smp || !smpp || !locids || !vals ||
        !maparr || !mapp)
        goto done;
    if (st_idx(&strs, "") != 0)
        goto done;

    /* Resolve every location once. */
    size_t nlines = 0;
    uint64_t q_frames = 0, q_named = 0, q_lined = 0;
    for (size_t i = 0; i < b->nloc; i++) {
        if ((uint32_t)i == b->marker) {
            nlines++;
            continue;
        }
        uintptr_t addr = b->loc_pc[i] - 1;
        const mp_map_ref *ref = mp_maps_lookup(maps, addr);
        loc_map[i] = ref ? ref->id : 0;
        if (mode != MP_PROF_SYMBOLIZE_NONE) {
            mp_obj *o = ref ? maps->objs[ref->obj] : NULL;
            info[i] = mp_syms_resolve(c->syms, o, addr, mode, !maps->fixed);
            if (info[i] == NULL)
                goto done;
        }
        const mp_pcinfo *pi = info[i];
        size_t nf = pi ? pi->nframes : 0;
        nlines += nf;
        bool fn = nf > 0, file = nf > 0, line = nf > 0;
        for (size_t k = 0; k < nf; k++) {
            fn = fn && pi->frames[k].func != NULL;
            file = file && pi->frames[k].file != NULL;
            line = line && pi->frames[k].line > 0;
            q_named += pi->frames[k].func != NULL;
            q_lined += pi->frames[k].file != NULL && pi->frames[k].line > 0;
        }
        q_frames += nf ? nf : 1;
        if (ref) {
            mapflags *m = &mf[ref->id - 1];
            if (m->locations++ == 0)
                m->fn = m->file = m->line = m->inl = true;
            m->fn = m->fn && fn;
            m->file = m->file && file;
            m->line = m->line && line;
            m->inl = m->inl && pi != NULL && (pi->flags & MP_PC_INLINE);
        }
    }

    /* Strings of the header first: readable tables. */
    static const char *const types[MP_VAL_COUNT][2] = {{"alloc_objects", "count"},
                                                       {"alloc_space", "bytes"},
                                                       {"inuse_objects", "count"},
                                                       {"inuse_space", "bytes"}};
    Perftools__Profiles__ValueType vt[MP_VAL_COUNT], *vtp[MP_VAL_COUNT], period_type;
    for (int k = 0; k < MP_VAL_COUNT; k++) {
        Perftools__Profiles__ValueType init = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
        vt[k] = init;
        vt[k].type = st_idx(&strs, types[k][0]);
        vt[k].unit = st_idx(&strs, types[k][1]);
        vtp[k] = &vt[k];
    }
    {
        Perftools__Profiles__ValueType init = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
        period_type = init;
        period_type.type = st_idx(&strs, "space");
        period_type.unit = st_idx(&strs, "bytes");
    }
    Perftools__Profiles__Label label = PERFTOOLS__PROFILES__LABEL__INIT, *labelp = &label;
    label.key = st_idx(&strs, "__delta__");
    label.str = st_idx(&strs, "false");
    if (label.key < 0 || label.str < 0 || period_type.unit < 0)
        goto done;
    if (b->ncomments != 0) {
        comment_idx = calloc(b->ncomments, sizeof *comment_idx);
        if (comment_idx == NULL)
            goto done;
        for (size_t i = 0; i < b->ncomments; i++)
            if ((comment_idx[i] = st_idx(&strs, b->comments[i])) < 0)
                goto done;
    }
    /* A peak profile holds in-use values only: its first value is
     * inuse_objects. */
    const int first = b->opt.inuse_only ? MP_VAL_INUSE_OBJECTS : 0;

    /* Mappings, in id order (objects in mp_maps order). */
    {
        size_t id = 0;
        for (size_t i = 0; i < maps->nobjs; i++) {
            const mp_obj *o = maps->objs[i];
            for (size_t j = 0; j < o->nsegs; j++, id++) {
                Perftools__Profiles__Mapping init = PERFTOOLS__PROFILES__MAPPING__INIT;
                Perftools__Profiles__Mapping *m = &maparr[id];
                *m = init;
                m->id = id + 1;
                m->memory_start = o->segs[j].start;
                m->memory_limit = o->segs[j].limit;
                m->file_offset = o->segs[j].file_offset;
                m->filename = st_idx(&strs, o->path);
                m->build_id = st_idx(&strs, o->build_id);
                if (m->filename < 0 || m->build_id < 0)
                    goto done;
                if (mf[id].locations > 0) {
                    m->has_functions = mf[id].fn;
                    m->has_filenames = mf[id].file;
                    m->has_line_numbers = mf[id].line;
                    m->has_inline_frames = mf[id].inl;
                }
                mapp[id] = m;
            }
        }
    }

    /* Locations, lines and functions. */
    lines = calloc(nlines ? nlines : 1, sizeof *lines);
    linep = calloc(nlines ? nlines : 1, sizeof *linep);
    if (!lines || !linep)
        goto done;
    size_t li = 0;
    for (size_t i = 0; i < b->nloc; i++) {
        Perftools__Profiles__Location init = PERFTOOLS__PROFILES__LOCATION__INIT;
        Perftools__Profiles__Location *l = &locs[i];
        *l = init;
        l->id = i + 1;
        locp[i] = l;
        l->line = &linep[li];
        if ((uint32_t)i == b->marker) {
            int64_t name = st_idx(&strs, MP_TRUNCATED_FRAME);
            uint64_t fid = name < 0 ? 0 : fn_id(&fns, name, name, 0);
            if (fid == 0)
                goto done;
            Perftools__Profiles__Line linit = PERFTOOLS__PROFILES__LINE__INIT;
            lines[li] = linit;
            lines[li].function_id = fid;
            linep[li] = &lines[li];
            li++;
            l->n_line = 1;
            continue;
        }
        l->mapping_id = loc_map[i];
        l->address = b->loc_pc[i] - 1;
        const mp_pcinfo *pi = info[i];
        size_t nf = pi ? pi->nframes : 0;
        for (size_t k = 0; k < nf; k++) {
            const mp_frame *f = &pi->frames[k];
            if (f->func == NULL && f->file == NULL)
                continue; /* nothing to say about this frame */
            int64_t name = st_idx(&strs, f->func);
            int64_t sys = f->sysname != NULL ? st_idx(&strs, f->sysname) : name;
            int64_t file = st_idx(&strs, f->file);
            uint64_t fid = (name < 0 || sys < 0 || file < 0) ? 0 : fn_id(&fns, name, sys, file);
            if (fid == 0)
                goto done;
            Perftools__Profiles__Line linit = PERFTOOLS__PROFILES__LINE__INIT;
            lines[li] = linit;
            lines[li].function_id = fid;
            lines[li].line = f->line;
            linep[li] = &lines[li];
            li++;
            l->n_line++;
        }
    }
    fnp = calloc(fns.n ? fns.n : 1, sizeof *fnp);
    if (fnp == NULL)
        goto done;
    for (size_t i = 0; i < fns.n; i++)
        fnp[i] = &fns.v[i];

    /* Samples. */
    for (size_t i = 0; i < b->nsmp; i++) {
        Perftools__Profiles__Sample init = PERFTOOLS__PROFILES__SAMPLE__INIT;
        const bsample *s = &b->smp[i];
        smp[i] = init;
        smp[i].n_location_id = s->depth;
        smp[i].location_id = &locids[s->off];
        for (size_t k = 0; k < s->depth; k++)
            locids[s->off + k] = (uint64_t)b->stk[s->off + k] + 1;
        smp[i].n_value = (size_t)(MP_VAL_COUNT - first);
        smp[i].value = &vals[i * MP_VAL_COUNT];
        for (int k = first; k < MP_VAL_COUNT; k++)
            smp[i].value[k - first] = round_value(s->v[k]);
        if (s->interval) {
            smp[i].n_label = 1;
            smp[i].label = &labelp;
        }
        smpp[i] = &smp[i];
    }

    Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
    prof.n_sample_type = (size_t)(MP_VAL_COUNT - first);
    prof.sample_type = vtp + first;
    prof.n_comment = b->ncomments;
    prof.comment = comment_idx;
    prof.n_sample = b->nsmp;
    prof.sample = smpp;
    prof.n_mapping = nmap;
    prof.mapping = mapp;
    prof.n_location = b->nloc;
    prof.location = locp;
    prof.n_function = fns.n;
    prof.function = fnp;
    prof.n_string_table = strs.n;
    prof.string_table = strs.v;
    prof.time_nanos = b->opt.time_nanos;
    prof.duration_nanos = b->opt.duration_nanos;
    prof.period_type = &period_type;
    prof.period = b->opt.period > INT64_MAX ? INT64_MAX : (int64_t)b->opt.period;

    size_t n = perftools__profiles__profile__get_packed_size(&prof);
    buf = malloc(n ? n : 1);
    if (buf == NULL)
        goto done;
    if (perftools__profiles__profile__pack(&prof, buf) != n) {
        st = MP_PROF_E_INTERNAL;
        goto done;
    }
    *out = buf;
    *len = n;
    buf = NULL;
    c->last_quality = (int)mp_quality_from_counts(q_frames, q_named, q_lined);
    st = MP_PROF_OK;
done:
    free(buf);
    free(info);
    free(loc_map);
    free(mf);
    free(locs);
    free(locp);
    free(lines);
    free(linep);
    free(smp);
    free(smpp);
    free(locids);
    free(vals);
    free(maparr);
    free(mapp);
    free(fnp);
    free(fns.v);
    free(fns.tab);
    free(strs.v);
    free(strs.tab);
    free(comment_idx);
    mp_report_abort(b);
    return st;
}
