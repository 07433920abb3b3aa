/* SPDX-License-Identifier: MIT */
/* Reading heap images (heap_image.h): load through the image package,
 * then check every object the schema names before copying it out.
 *
 * Trust. The image loader checks the file (header fields, checksums,
 * tables, every unit against its shape, every reference); it also
 * reacquires every foreign entry, and a `dlsym` entry makes it dlopen()
 * a library. A heap image names code locations only, so the registry
 * allows `code` entries alone (mp_img_registry_allow_foreign) and the
 * loader refuses any other entry before it reacquires anything: `mimprof
 * image` on an untrusted file never loads a library. The schema check
 * after the load trusts nothing the loader does not guarantee: object
 * types, unit counts, string lengths (a str's length word against the
 * NUL the loader puts after its bytes), bounds, and that every frame maps
 * back into a mapping of the image. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "heap_image.h"
#include "index.h"
#include "report/elf_reader.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* --------------------------------------------------------- schema checks */

typedef struct stk_ent {
    const void *obj;
    uint32_t index;
} stk_ent;

typedef struct code_ent {
    uintptr_t value;
    uint32_t map;
    uint64_t off;
} code_ent;

typedef struct rd {
    const mp_img_heap *h;
    const mp_himg_types *T;
    char *err;
    size_t errlen;
    mp_himg *img;
    /* stack object -> index, for the samples and intervals: stk[0 .. nstk)
     * in stk_ix */
    stk_ent *stk;
    size_t nstk, stk_cap;
    mp_index stk_ix;
    /* code value -> (mapping, offset) cache: code[0 .. ncode) in code_ix */
    code_ent *code;
    size_t ncode, code_cap;
    mp_index code_ix;
} rd;

static bool is_a(const rd *r, const void *o, int t)
{
    return o != NULL && mp_img_type_of(r->h, o) == r->T->t[t];
}

/* A counted object of type t (words or refs: the count in unit 0): its
 * values and their number. */
static const mp_img_word *counted_of(const rd *r, const void *o, int t, size_t *n)
{
    if (!is_a(r, o, t))
        return NULL;
    const mp_img_word *w = o;
    size_t units = mp_img_units(o);
    if (units < 1 || w[0] != units - 1)
        return NULL;
    *n = units - 1;
    return w + 1;
}

static const mp_img_word *words_of(const rd *r, const void *o, size_t *n)
{
    return counted_of(r, o, MP_HIMG_T_WORDS, n);
}

static const mp_img_word *refs_of(const rd *r, const void *o, size_t *n)
{
    return counted_of(r, o, MP_HIMG_T_REFS, n);
}

/* A str object as a NUL-terminated copy (malloc()ed) of at most `max`
 * bytes; NULL (and *bad) if it is not one. The loader keeps a NUL after
 * the stored bytes, so strnlen never reads past them: a length word that
 * disagrees with the bytes is caught here. */
static char *str_of(const rd *r, const void *o, size_t max, bool *bad)
{
    *bad = true;
    if (!is_a(r, o, MP_HIMG_T_STR) || mp_img_units(o) != 2)
        return NULL;
    const mp_img_word *w = o;
    size_t n = w[0];
    const char *s = (const char *)w[1];
    if (n > max || (s == NULL && n != 0))
        return NULL;
    if (s != NULL && strnlen(s, n + 1) != n)
        return NULL;
    char *c = malloc(n + 1);
    if (c == NULL)
        return NULL;
    if (n)
        memcpy(c, s, n);
    c[n] = '\0';
    *bad = false;
    return c;
}

static double dval(mp_img_word w)
{
    uint64_t u = (uint64_t)w;
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static bool root_words(rd *r, const char *name, size_t want, const mp_img_word **out)
{
    void *o;
    size_t n;
    if (!mp_img_root_find(r->h, name, &o))
        return fail(r->err, r->errlen, "no root '%s': not a heap image", name), false;
    if ((*out = words_of(r, o, &n)) == NULL || n != want)
        return fail(r->err, r->errlen, "root '%s' is not %zu words", name, want), false;
    return true;
}

static bool root_refs(rd *r, const char *name, const mp_img_word **out, size_t *n)
{
    void *o;
    if (!mp_img_root_find(r->h, name, &o))
        return fail(r->err, r->errlen, "no root '%s': not a heap image", name), false;
    if ((*out = refs_of(r, o, n)) == NULL)
        return fail(r->err, r->errlen, "root '%s' is not a list", name), false;
    return true;
}

static bool hex_id(const char *s)
{
    size_t n = strlen(s);
    if (n % 2 != 0 || n > MP_HIMG_BUILD_ID_HEX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

typedef struct segref {
    uint64_t start, limit;
} segref;

static int seg_cmp(const void *a, const void *b)
{
    const segref *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static bool read_mappings(rd *r)
{
    const mp_img_word *v;
    size_t n;
    if (!root_refs(r, MP_HIMG_ROOT_MAPPINGS, &v, &n))
        return false;
    if (n > 65536)
        return fail(r->err, r->errlen, "%zu mappings: more than a process has", n), false;
    mp_himg *img = r->img;
    img->maps = calloc(n ? n : 1, sizeof *img->maps);
    if (img->maps == NULL)
        return fail(r->err, r->errlen, "out of memory"), false;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const mp_img_word *m = (const mp_img_word *)v[i];
        mp_himg_mapping *out = &img->maps[i];
        img->nmaps = i + 1;
        if (!is_a(r, m, MP_HIMG_T_MAPPING) || mp_img_units(m) != MP_HIMG_MAPPING_UNITS)
            return fail(r->err, r->errlen, "mapping %zu is not a mapping", i), false;
        bool bad;
        out->path = str_of(r, (const void *)m[0], MP_HIMG_PATH_MAX, &bad);
        if (bad)
            return fail(r->err, r->errlen, "mapping %zu: bad path", i), false;
        char *id = str_of(r, (const void *)m[1], MP_HIMG_BUILD_ID_HEX, &bad);
        if (bad || !hex_id(id)) {
            free(id);
            return fail(r->err, r->errlen, "mapping %zu: bad build-id", i), false;
        }
        memcpy(out->build_id, id, strlen(id) + 1);
        free(id);
        size_t ns;
        const mp_img_word *s = words_of(r, (const void *)m[2], &ns);
        if (s == NULL || ns % 3 != 0 || ns == 0 || ns / 3 > MP_HIMG_MAX_SEGS)
            return fail(r->err, r->errlen, "mapping %zu: bad segments", i), false;
        out->nsegs = ns / 3;
        out->segs = malloc(out->nsegs * sizeof *out->segs);
        if (out->segs == NULL)
            return fail(r->err, r->errlen, "out of memory"), false;
        for (size_t j = 0; j < out->nsegs; j++) {
            out->segs[j] = (mp_himg_seg){s[3 * j], s[3 * j + 1], s[3 * j + 2]};
            if (out->segs[j].start >= out->segs[j].limit)
                return fail(r->err, r->errlen, "mapping %zu: empty segment %zu", i, j), false;
        }
        total += out->nsegs;
        out->base = m[3];
        if (m[4] & ~(mp_img_word)MP_HIMG_MAP_FLAGS)
            return fail(r->err, r->errlen, "mapping %zu: unknown flags", i), false;
        out->flags = (unsigned)m[4];
    }
    /* The report side's address index needs disjoint segments. */
    segref *all = malloc((total ? total : 1) * sizeof *all);
    if (all == NULL)
        return fail(r->err, r->errlen, "out of memory"), false;
    size_t k = 0;
    for (size_t i = 0; i < img->nmaps; i++)
        for (size_t j = 0; j < img->maps[i].nsegs; j++)
            all[k++] = (segref){img->maps[i].segs[j].start, img->maps[i].segs[j].limit};
    qsort(all, k, sizeof *all, seg_cmp);
    bool overlap = false;
    for (size_t i = 1; i < k; i++)
        overlap = overlap || all[i].start < all[i - 1].limit;
    free(all);
    if (overlap)
        return fail(r->err, r->errlen, "mappings overlap"), false;
    return true;
}

/* Where code unit `value` lies in the image: the mapping with the unit's
 * build-id whose segment holds bias + offset, into e->map and e->off. */
static bool code_place(rd *r, uintptr_t value, code_ent *e)
{
    mp_img_code c;
    if (!mp_img_code_lookup(r->h, value, &c) || c.build_id_len == 0 ||
        c.build_id_len > MP_HIMG_BUILD_ID_HEX / 2)
        return fail(r->err, r->errlen, "a frame is not a code location with a build-id"), false;
    char hex[MP_HIMG_BUILD_ID_HEX + 1];
    mp_elf_hex(c.build_id, c.build_id_len, hex);
    uint32_t found = UINT32_MAX;
    for (size_t i = 0; i < r->img->nmaps && found == UINT32_MAX; i++) {
        const mp_himg_mapping *m = &r->img->maps[i];
        if (strcmp(m->build_id, hex) != 0)
            continue;
        uint64_t a = m->base + (uint64_t)c.offset;
        if (a < m->base)
            continue;
        for (size_t s = 0; s < m->nsegs; s++)
            if (a > m->segs[s].start && a <= m->segs[s].limit)
                found = (uint32_t)i;
    }
    if (found == UINT32_MAX)
        return fail(r->err, r->errlen,
                    "a frame names code(%s, +0x%llx), which no mapping of the image holds", hex,
                    (unsigned long long)c.offset),
               false;
    *e = (code_ent){value, found, (uint64_t)c.offset};
    return true;
}

/* The address a code unit had in the writing process (code_place, cached
 * by value). */
static bool code_pc(rd *r, uintptr_t value, uintptr_t *pc)
{
    if (!mp_index_reserve(&r->code_ix))
        return fail(r->err, r->errlen, "out of memory"), false;
    mp_index_probe p = mp_index_start(&r->code_ix, mp_hash_ptr(value));
    uint32_t k;
    const code_ent *e = NULL;
    while (e == NULL && mp_index_next(&p, &k))
        if (r->code[k].value == value)
            e = &r->code[k];
    if (e == NULL) {
        if (!mp_array_reserve((void **)&r->code, &r->code_cap, r->ncode + 1, sizeof *r->code))
            return fail(r->err, r->errlen, "out of memory"), false;
        if (!code_place(r, value, &r->code[r->ncode]))
            return false;
        mp_index_put(&r->code_ix, &p, (uint32_t)r->ncode);
        e = &r->code[r->ncode++];
    }
    *pc = (uintptr_t)(r->img->maps[e->map].base + e->off);
    return true;
}

/* Index of the stack object `o`, read on first sight. */
static bool stack_index(rd *r, const void *o, uint32_t *index)
{
    if (!is_a(r, o, MP_HIMG_T_STACK))
        return fail(r->err, r->errlen, "a sample's stack is not a stack"), false;
    if (!mp_index_reserve(&r->stk_ix) ||
        !mp_array_reserve((void **)&r->stk, &r->stk_cap, r->nstk + 1, sizeof *r->stk))
        return fail(r->err, r->errlen, "out of memory"), false;
    mp_index_probe p = mp_index_start(&r->stk_ix, mp_hash_ptr((uintptr_t)o));
    uint32_t k;
    while (mp_index_next(&p, &k))
        if (r->stk[k].obj == o) {
            *index = r->stk[k].index;
            return true;
        }

    const mp_img_word *w = o;
    size_t units = mp_img_units(o);
    if (units < MP_HIMG_STACK_HEAD || w[0] != units - 1 ||
        units - MP_HIMG_STACK_HEAD > MP_HIMG_MAX_DEPTH)
        return fail(r->err, r->errlen, "a stack has a bad frame count"), false;
    if (w[1] & ~(mp_img_word)MP_HIMG_STACK_FLAGS)
        return fail(r->err, r->errlen, "a stack has unknown flags"), false;
    uint32_t depth = (uint32_t)(units - MP_HIMG_STACK_HEAD);
    const mp_img_word *raw = NULL;
    if (w[2] != 0) {
        size_t n;
        raw = words_of(r, (const void *)w[2], &n);
        if (raw == NULL || n != depth)
            return fail(r->err, r->errlen, "a stack's raw frames are not %u words", depth), false;
    }
    mp_himg *img = r->img;
    if (img->nstacks == img->meta[MP_HIMG_META_NSTACKS])
        return fail(r->err, r->errlen, "more stacks than the %llu the image declares",
                    (unsigned long long)img->meta[MP_HIMG_META_NSTACKS]),
               false;
    mp_himg_stack *s = &img->stacks[img->nstacks];
    s->pcs = malloc((depth ? depth : 1) * sizeof *s->pcs);
    if (s->pcs == NULL)
        return fail(r->err, r->errlen, "out of memory"), false;
    s->depth = depth;
    s->truncated = (w[1] & MP_HIMG_STACK_TRUNCATED) != 0;
    img->nstacks++;
    for (uint32_t i = 0; i < depth; i++) {
        uintptr_t v = w[MP_HIMG_STACK_HEAD + i];
        if (v == 0) {
            if (raw == NULL)
                return fail(r->err, r->errlen, "a stack frame is neither code nor raw"), false;
            s->pcs[i] = raw[i];
            continue;
        }
        if (!code_pc(r, v, &s->pcs[i]))
            return false;
        s->named++;
    }
    r->stk[r->nstk] = (stk_ent){o, (uint32_t)(img->nstacks - 1)};
    mp_index_put(&r->stk_ix, &p, (uint32_t)r->nstk++);
    *index = (uint32_t)(img->nstacks - 1);
    return true;
}

/* A list of per-stack sums (`mimprof.interval` objects) under root
 * `name`, of `want` entries. */
static bool read_sums(rd *r, const char *name, uint64_t want, mp_himg_interval **out, size_t *nout)
{
    const mp_img_word *v;
    size_t n;
    if (!root_refs(r, name, &v, &n))
        return false;
    if (n != want)
        return fail(r->err, r->errlen, "%zu entries in '%s', the image declares %llu", n, name,
                    (unsigned long long)want),
               false;
    *out = malloc((n ? n : 1) * sizeof **out);
    if (*out == NULL)
        return fail(r->err, r->errlen, "out of memory"), false;
    for (size_t i = 0; i < n; i++) {
        const mp_img_word *s = (const mp_img_word *)v[i];
        if (!is_a(r, s, MP_HIMG_T_INTERVAL) || mp_img_units(s) != MP_HIMG_INTERVAL_UNITS)
            return fail(r->err, r->errlen, "entry %zu of '%s' is not one", i, name), false;
        mp_himg_interval *o = &(*out)[i];
        if (!stack_index(r, (const void *)s[0], &o->stack))
            return false;
        o->objects = dval(s[1]);
        o->bytes = dval(s[2]);
        o->records = s[3];
        if (!isfinite(o->objects) || o->objects < 0 || !isfinite(o->bytes) || o->bytes < 0)
            return fail(r->err, r->errlen, "entry %zu of '%s': bad values", i, name), false;
        *nout = i + 1;
    }
    return true;
}

static bool read_samples(rd *r)
{
    mp_himg *img = r->img;
    const mp_img_word *v;
    size_t n;
    if (!root_refs(r, MP_HIMG_ROOT_LIVE, &v, &n))
        return false;
    uint64_t want = img->meta[MP_HIMG_META_NLIVE];
    size_t per = img->meta[MP_HIMG_META_SCHEMA] == MP_HIMG_SCHEMA_V1 ? MP_HIMG_SAMPLE_WORDS_V1
                                                                     : MP_HIMG_SAMPLE_WORDS;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const mp_img_word *g = (const mp_img_word *)v[i];
        if (!is_a(r, g, MP_HIMG_T_LIVE) || mp_img_units(g) != MP_HIMG_LIVE_UNITS)
            return fail(r->err, r->errlen, "live entry %zu is not a stack's samples", i), false;
        uint32_t stack;
        if (!stack_index(r, (const void *)g[0], &stack))
            return false;
        size_t nw;
        const mp_img_word *w = words_of(r, (const void *)g[1], &nw);
        if (w == NULL || nw == 0 || nw % per != 0)
            return fail(r->err, r->errlen,
                        "live entry %zu: samples are not size, weight, "
                        "generation%s tuples",
                        i, per == MP_HIMG_SAMPLE_WORDS ? ", age" : ""),
                   false;
        if (nw / per > want - img->nlive)
            return fail(r->err, r->errlen, "more live samples than the %llu the image declares",
                        (unsigned long long)want),
                   false;
        if (img->nlive + nw / per > cap) {
            size_t nc = cap ? cap : 1024;
            while (nc < img->nlive + nw / per)
                nc *= 2;
            mp_himg_sample *l = realloc(img->live, nc * sizeof *l);
            if (l == NULL)
                return fail(r->err, r->errlen, "out of memory"), false;
            img->live = l;
            cap = nc;
        }
        for (size_t k = 0; k < nw; k += per) {
            mp_himg_sample *o = &img->live[img->nlive];
            o->stack = stack;
            o->size = w[k];
            o->weight = dval(w[k + 1]);
            o->gen = w[k + 2];
            o->age_ns = per == MP_HIMG_SAMPLE_WORDS ? w[k + 3] : MP_HIMG_AGE_UNKNOWN;
            if (o->age_ns == MP_HIMG_AGE_UNKNOWN && per == MP_HIMG_SAMPLE_WORDS)
                o->age_ns--; /* the largest age, not "unknown" */
            if (!isfinite(o->weight) || o->weight < 0)
                return fail(r->err, r->errlen, "live entry %zu: weight %g", i, o->weight), false;
            img->nlive++;
        }
    }
    if (img->nlive != want)
        return fail(r->err, r->errlen, "%zu live samples, the image declares %llu", img->nlive,
                    (unsigned long long)want),
               false;
    if (!read_sums(r, MP_HIMG_ROOT_INTERVAL, img->meta[MP_HIMG_META_NINTERVAL], &img->interval,
                   &img->ninterval))
        return false;
    void *peak_root;
    if (mp_img_root_find(r->h, MP_HIMG_ROOT_PEAK_META, &peak_root)) { /* optional: the peak */
        const mp_img_word *pm;
        if (!root_words(r, MP_HIMG_ROOT_PEAK_META, MP_HIMG_PEAK_COUNT, &pm))
            return false;
        memcpy(img->peak, pm, sizeof img->peak);
        if (!read_sums(r, MP_HIMG_ROOT_PEAK, img->peak[MP_HIMG_PEAK_NSTACKS], &img->peak_sums,
                       &img->npeak))
            return false;
        img->has_peak = true;
    }
    if (img->nstacks != img->meta[MP_HIMG_META_NSTACKS])
        return fail(r->err, r->errlen, "%zu stacks, the image declares %llu", img->nstacks,
                    (unsigned long long)img->meta[MP_HIMG_META_NSTACKS]),
               false;
    return true;
}

static bool read_config(rd *r)
{
    mp_himg *img = r->img;
    const mp_img_word *c, *k, *m;
    if (!root_words(r, MP_HIMG_ROOT_META, MP_HIMG_META_COUNT, &m))
        return false;
    memcpy(img->meta, m, sizeof img->meta);
    if (img->meta[MP_HIMG_META_SCHEMA] != MP_HIMG_SCHEMA &&
        img->meta[MP_HIMG_META_SCHEMA] != MP_HIMG_SCHEMA_V1)
        return fail(r->err, r->errlen,
                    "heap image schema %llu; this reader knows schemas %u and %u",
                    (unsigned long long)img->meta[MP_HIMG_META_SCHEMA], MP_HIMG_SCHEMA_V1,
                    MP_HIMG_SCHEMA),
               false;
    if (!root_words(r, MP_HIMG_ROOT_CONFIG, MP_HIMG_CFG_COUNT, &c) ||
        !root_words(r, MP_HIMG_ROOT_COUNTERS, MP_HIMG_CTR_COUNT, &k))
        return false;
    mp_prof_config *cfg = &img->cfg;
    cfg->sample_interval_bytes = c[MP_HIMG_CFG_INTERVAL];
    cfg->max_stack_depth = (unsigned)c[MP_HIMG_CFG_MAX_DEPTH];
    cfg->ring_capacity = c[MP_HIMG_CFG_RING];
    cfg->max_live_samples = c[MP_HIMG_CFG_MAX_LIVE];
    cfg->seed = c[MP_HIMG_CFG_SEED];
    cfg->symbolize = (mp_prof_symbolize)c[MP_HIMG_CFG_SYMBOLIZE];
    cfg->overflow_stacks = c[MP_HIMG_CFG_OVERFLOW];
    cfg->report_max_records = c[MP_HIMG_CFG_REPORT_MAX];
    if (c[MP_HIMG_CFG_INTERVAL] < 1 || c[MP_HIMG_CFG_INTERVAL] > MP_PROF_MAX_INTERVAL ||
        c[MP_HIMG_CFG_MAX_DEPTH] < 1 || c[MP_HIMG_CFG_MAX_DEPTH] > MP_HIMG_MAX_DEPTH ||
        c[MP_HIMG_CFG_SYMBOLIZE] > MP_PROF_SYMBOLIZE_LINES)
        return fail(r->err, r->errlen, "the session configuration is out of range"), false;
    mp_himg_counters_get(&img->counters, k);

    void *o;
    bool bad = true;
    char *v = mp_img_root_find(r->h, MP_HIMG_ROOT_VERSION, &o)
                  ? str_of(r, o, sizeof img->version - 1, &bad)
                  : NULL;
    if (bad) {
        free(v);
        return fail(r->err, r->errlen, "root '%s' is not a version string", MP_HIMG_ROOT_VERSION),
               false;
    }
    memcpy(img->version, v, strlen(v) + 1);
    free(v);
    /* Every sample refers to a stack; the count bounds the table. */
    uint64_t ns = img->meta[MP_HIMG_META_NSTACKS];
    if (ns > mp_img_heap_count(r->h))
        return fail(r->err, r->errlen, "the image declares %llu stacks for its samples",
                    (unsigned long long)ns),
               false;
    img->stacks = calloc(ns ? ns : 1, sizeof *img->stacks);
    if (img->stacks == NULL)
        return fail(r->err, r->errlen, "out of memory"), false;
    return true;
}

int mp_himg_from_heap(const mp_img_heap *heap, const mp_himg_types *types, mp_himg **out, char *err,
                      size_t errlen)
{
    rd r = {.h = heap, .T = types, .err = err, .errlen = errlen};
    r.img = calloc(1, sizeof *r.img);
    if (r.img == NULL)
        return fail(err, errlen, "out of memory");
    bool ok = read_config(&r) && read_mappings(&r) && read_samples(&r);
    free(r.stk);
    mp_index_free(&r.stk_ix);
    free(r.code);
    mp_index_free(&r.code_ix);
    if (!ok) {
        mp_himg_free(r.img);
        return -1;
    }
    *out = r.img;
    return 0;
}

void mp_himg_free(mp_himg *img)
{
    if (img == NULL)
        return;
    for (size_t i = 0; i < img->nmaps; i++) {
        free(img->maps[i].path);
        free(img->maps[i].segs);
    }
    for (size_t i = 0; i < img->nstacks; i++)
        free(img->stacks[i].pcs);
    free(img->maps);
    free(img->stacks);
    free(img->live);
    free(img->interval);
    free(img->peak_sums);
    free(img);
}

void mp_himg_live_totals(const mp_himg *img, double *objects, double *bytes)
{
    double o = 0, b = 0;
    for (size_t i = 0; i < img->nlive; i++) {
        o += img->live[i].weight;
        b += img->live[i].weight * (double)img->live[i].size;
    }
    *objects = o;
    *bytes = b;
}

/* ------------------------------------------------------------------ load */

int mp_himg_load_memory(const void *data, size_t len, mp_himg **out, char *err, size_t errlen)
{
    mp_img_registry *reg = NULL;
    mp_himg_types T;
    mp_img_error e;
    mp_img_status st = mp_himg_registry_new(&reg, &T, &e);
    if (st == MP_IMG_OK)
        st = mp_img_registry_allow_foreign(reg, MP_IMG_ALLOW_CODE, &e);
    if (st != MP_IMG_OK) {
        mp_img_registry_free(reg);
        return fail(err, errlen, "%s: %s", mp_img_strerror(st), e.detail);
    }
    mp_img_heap *h = NULL;
    st = mp_img_load_memory(reg, data, len, &h, &e);
    int rc;
    if (st != MP_IMG_OK)
        rc = fail(err, errlen, "%s: %s", mp_img_strerror(st), e.detail);
    else
        rc = mp_himg_from_heap(h, &T, out, err, errlen);
    mp_img_heap_free(h);
    mp_img_registry_free(reg);
    return rc;
}

int mp_himg_load(const char *path, mp_himg **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(err, errlen, "%s: cannot open: %s", mp_img_strerror(MP_IMG_E_IO),
                    strerror(errno));
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= MP_HIMG_MAX_FILE) {
                free(buf);
                fclose(f);
                return fail(err, errlen, "%s: larger than the limit of %zu MiB",
                            mp_img_strerror(MP_IMG_E_IO), MP_HIMG_MAX_FILE >> 20);
            }
            size_t nc = cap ? cap * 2 : (size_t)1 << 20;
            unsigned char *b = realloc(buf, nc);
            if (b == NULL) {
                free(buf);
                fclose(f);
                return fail(err, errlen, "out of memory");
            }
            buf = b;
            cap = nc;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    int rc = bad ? fail(err, errlen, "%s: read error", mp_img_strerror(MP_IMG_E_IO))
                 : mp_himg_load_memory(buf, len, out, err, errlen);
    free(buf);
    return rc;
}
