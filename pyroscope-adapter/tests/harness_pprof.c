/* SPDX-License-Identifier: MIT */
/* pprof for the tests, both ways, written by hand: a decoder to read
 * what came back (from the library or from a server) and the encoder of
 * the fixed test profile; plus the fixed-bytes backend. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t sv(uint64_t v) { return (int64_t)v; }

/* realloc for one more element at index n, doubling at powers of two (so
 * that decoding 100,000 samples stays linear, also under MALLOC_PERTURB_) */
static void *grow1(void *p, size_t n, size_t elem)
{
    if (n & (n - 1))
        return p;
    return realloc(p, (n ? 2 * n : 1) * elem);
}

static void packed(const pbf *f, uint64_t **arr, size_t *n)
{
    if (f->wt == 0) {
        *arr = grow1(*arr, *n, sizeof **arr);
        (*arr)[(*n)++] = f->v;
        return;
    }
    if (!f->len)
        return;
    pbr r = pb_sub(f);
    while (r.p < r.end) {
        uint64_t x = 0;
        int shift = 0;
        while (r.p < r.end) {
            uint8_t b = *r.p++;
            x |= (uint64_t)(b & 0x7F) << shift;
            shift += 7;
            if (!(b & 0x80))
                break;
        }
        *arr = grow1(*arr, *n, sizeof **arr);
        (*arr)[(*n)++] = x;
    }
}

bool tp_decode(const uint8_t *p, size_t n, tp_profile *out)
{
    memset(out, 0, sizeof *out);
    pbr r = {p, p ? p + n : NULL, false};
    pbf f;
    while (pb_next(&r, &f)) {
        pbr s = pb_sub(&f);
        pbf g;
        switch (f.field) {
        case 1:
            if (out->ntypes < 16) {
                int64_t t = 0, u = 0;
                while (pb_next(&s, &g))
                    if (g.field == 1)
                        t = sv(g.v);
                    else if (g.field == 2)
                        u = sv(g.v);
                out->types[out->ntypes][0] = t;
                out->types[out->ntypes][1] = u;
                out->ntypes++;
            }
            break;
        case 2: {
            out->samples = grow1(out->samples, out->nsamples, sizeof *out->samples);
            tp_sample *smp = &out->samples[out->nsamples++];
            memset(smp, 0, sizeof *smp);
            uint64_t *vals = NULL;
            while (pb_next(&s, &g)) {
                if (g.field == 1) {
                    packed(&g, &smp->locs, &smp->nlocs);
                } else if (g.field == 2) {
                    packed(&g, &vals, &smp->nvalues);
                } else if (g.field == 3 && !smp->label_key) {
                    pbr l = pb_sub(&g);
                    pbf h;
                    while (pb_next(&l, &h))
                        if (h.field == 1)
                            smp->label_key = sv(h.v);
                        else if (h.field == 2)
                            smp->label_str = sv(h.v);
                }
            }
            smp->values = (int64_t *)vals;
            break;
        }
        case 3:
            out->mappings = grow1(out->mappings, out->nmappings, sizeof *out->mappings);
            memset(&out->mappings[out->nmappings], 0, sizeof *out->mappings);
            while (pb_next(&s, &g)) {
                switch (g.field) {
                case 1:
                    out->mappings[out->nmappings].id = g.v;
                    break;
                case 2:
                    out->mappings[out->nmappings].start = g.v;
                    break;
                case 3:
                    out->mappings[out->nmappings].limit = g.v;
                    break;
                case 5:
                    out->mappings[out->nmappings].filename = sv(g.v);
                    break;
                case 6:
                    out->mappings[out->nmappings].build_id = sv(g.v);
                    break;
                case 7:
                    out->mappings[out->nmappings].has_functions = g.v != 0;
                    break;
                }
            }
            out->nmappings++;
            break;
        case 4:
            out->locations = grow1(out->locations, out->nlocations, sizeof *out->locations);
            memset(&out->locations[out->nlocations], 0, sizeof *out->locations);
            while (pb_next(&s, &g)) {
                if (g.field == 1)
                    out->locations[out->nlocations].id = g.v;
                else if (g.field == 2)
                    out->locations[out->nlocations].mapping = g.v;
                else if (g.field == 3)
                    out->locations[out->nlocations].address = g.v;
                else if (g.field == 4 && !out->locations[out->nlocations].function) {
                    pbr l = pb_sub(&g);
                    pbf h;
                    while (pb_next(&l, &h))
                        if (h.field == 1)
                            out->locations[out->nlocations].function = h.v;
                }
            }
            out->nlocations++;
            break;
        case 5:
            out->functions = grow1(out->functions, out->nfunctions, sizeof *out->functions);
            memset(&out->functions[out->nfunctions], 0, sizeof *out->functions);
            while (pb_next(&s, &g)) {
                if (g.field == 1)
                    out->functions[out->nfunctions].id = g.v;
                else if (g.field == 2)
                    out->functions[out->nfunctions].name = sv(g.v);
            }
            out->nfunctions++;
            break;
        case 6:
            out->strings = grow1(out->strings, out->nstrings, sizeof *out->strings);
            out->strings[out->nstrings++] = strndup((const char *)f.data, f.len);
            break;
        case 9:
            out->time_nanos = sv(f.v);
            break;
        case 10:
            out->duration_nanos = sv(f.v);
            break;
        case 11:
            while (pb_next(&s, &g))
                if (g.field == 1)
                    out->period_type[0] = sv(g.v);
                else if (g.field == 2)
                    out->period_type[1] = sv(g.v);
            break;
        case 12:
            out->period = sv(f.v);
            break;
        }
    }
    return !r.bad;
}

void tp_free(tp_profile *p)
{
    for (size_t i = 0; i < p->nstrings; i++)
        free(p->strings[i]);
    free(p->strings);
    for (size_t i = 0; i < p->nsamples; i++) {
        free(p->samples[i].locs);
        free(p->samples[i].values);
    }
    free(p->samples);
    free(p->locations);
    free(p->functions);
    free(p->mappings);
    memset(p, 0, sizeof *p);
}

const char *tp_str(const tp_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->nstrings ? p->strings[i] : "";
}

int tp_type(const tp_profile *p, const char *type)
{
    for (size_t i = 0; i < p->ntypes; i++)
        if (strcmp(tp_str(p, p->types[i][0]), type) == 0)
            return (int)i;
    return -1;
}

int64_t tp_total(const tp_profile *p, int type)
{
    int64_t t = 0;
    for (size_t i = 0; type >= 0 && i < p->nsamples; i++)
        if ((size_t)type < p->samples[i].nvalues)
            t += p->samples[i].values[type];
    return t;
}

static const char *loc_name(const tp_profile *p, uint64_t loc)
{
    for (size_t i = 0; i < p->nlocations; i++) {
        if (p->locations[i].id != loc)
            continue;
        for (size_t k = 0; k < p->nfunctions; k++)
            if (p->functions[k].id == p->locations[i].function)
                return tp_str(p, p->functions[k].name);
    }
    return "";
}

int64_t tp_total_func(const tp_profile *p, int type, const char *func)
{
    int64_t t = 0;
    for (size_t i = 0; type >= 0 && i < p->nsamples; i++) {
        for (size_t k = 0; k < p->samples[i].nlocs; k++) {
            if (strcmp(loc_name(p, p->samples[i].locs[k]), func) == 0) {
                if ((size_t)type < p->samples[i].nvalues)
                    t += p->samples[i].values[type];
                break;
            }
        }
    }
    return t;
}

const char *tp_leaf(const tp_profile *p, size_t i)
{
    return p->samples[i].nlocs ? loc_name(p, p->samples[i].locs[0]) : "";
}

/* --- the fixed heap profile ---------------------------------------------- */

enum {
    S_EMPTY,
    S_ALLOC_OBJ,
    S_COUNT,
    S_ALLOC_SPACE,
    S_BYTES,
    S_INUSE_OBJ,
    S_INUSE_SPACE,
    S_SPACE,
    S_MAIN,
    S_WORK,
    S_SMALL,
    S_BIG,
    S_DELTA,
    S_FALSE,
    S_NSTR
};
static const char *const fixed_strings[S_NSTR] = {
    "",      "alloc_objects", "count", "alloc_space", "bytes",     "inuse_objects", "inuse_space",
    "space", "main",          "work",  "alloc_small", "alloc_big", "__delta__",     "false"};

static void value_type(tbuf *b, uint32_t field, int t, int u)
{
    tbuf m = {0};
    pbw_varint(&m, 1, (uint64_t)t);
    pbw_varint(&m, 2, (uint64_t)u);
    pbw_bytes(b, field, m.p, m.len);
    tbuf_free(&m);
}

static void raw_varint(tbuf *b, uint64_t x)
{
    do {
        uint8_t c = x & 0x7F;
        x >>= 7;
        if (x)
            c |= 0x80;
        tbuf_put(b, &c, 1);
    } while (x);
}

static void sample(tbuf *b, const uint64_t *locs, size_t n, const int64_t v[4], bool label)
{
    tbuf s = {0}, pk = {0}, pv = {0};
    for (size_t i = 0; i < n; i++)
        raw_varint(&pk, locs[i]);
    pbw_bytes(&s, 1, pk.p, pk.len);
    for (int i = 0; i < 4; i++)
        raw_varint(&pv, (uint64_t)v[i]);
    pbw_bytes(&s, 2, pv.p, pv.len);
    if (label) {
        tbuf l = {0};
        pbw_varint(&l, 1, S_DELTA);
        pbw_varint(&l, 2, S_FALSE);
        pbw_bytes(&s, 3, l.p, l.len);
        tbuf_free(&l);
    }
    pbw_bytes(b, 2, s.p, s.len);
    tbuf_free(&s);
    tbuf_free(&pk);
    tbuf_free(&pv);
}

uint8_t *tp_build_heap(const tp_heap_values *v, int64_t time_ns, int64_t duration_ns,
                       bool delta_label, size_t *len)
{
    tbuf b = {0};
    value_type(&b, 1, S_ALLOC_OBJ, S_COUNT);
    value_type(&b, 1, S_ALLOC_SPACE, S_BYTES);
    value_type(&b, 1, S_INUSE_OBJ, S_COUNT);
    value_type(&b, 1, S_INUSE_SPACE, S_BYTES);
    /* locations 1..4 = main, work, alloc_small, alloc_big; leaf first */
    static const uint64_t small[3] = {3, 2, 1}, big[3] = {4, 2, 1};
    for (int k = 0; k < 2; k++) {
        const uint64_t *stack = k == 0 ? small : big;
        int64_t interval[4] = {v->alloc_objects[k], v->alloc_space[k], 0, 0};
        int64_t live[4] = {0, 0, v->inuse_objects[k], v->inuse_space[k]};
        if (interval[0] || interval[1])
            sample(&b, stack, 3, interval, delta_label);
        if (live[2] || live[3])
            sample(&b, stack, 3, live, false);
    }
    static const int names[4] = {S_MAIN, S_WORK, S_SMALL, S_BIG};
    for (int i = 0; i < 4; i++) {
        tbuf loc = {0}, line = {0};
        pbw_varint(&loc, 1, (uint64_t)i + 1);
        pbw_varint(&line, 1, (uint64_t)i + 1);
        pbw_bytes(&loc, 4, line.p, line.len);
        pbw_bytes(&b, 4, loc.p, loc.len);
        tbuf_free(&loc);
        tbuf_free(&line);
    }
    for (int i = 0; i < 4; i++) {
        tbuf fn = {0};
        pbw_varint(&fn, 1, (uint64_t)i + 1);
        pbw_varint(&fn, 2, (uint64_t)names[i]);
        pbw_varint(&fn, 3, (uint64_t)names[i]);
        pbw_bytes(&b, 5, fn.p, fn.len);
        tbuf_free(&fn);
    }
    for (int i = 0; i < S_NSTR; i++)
        pbw_str(&b, 6, fixed_strings[i]);
    pbw_varint(&b, 9, (uint64_t)time_ns);
    pbw_varint(&b, 10, (uint64_t)duration_ns);
    value_type(&b, 11, S_SPACE, S_BYTES);
    pbw_varint(&b, 12, 524288);
    *len = b.len;
    return b.p;
}

uint8_t *tp_build_wide(int bits, int64_t bytes, int64_t time_ns, size_t *len)
{
    /* strings: the fixed ones, then bit<i>_<b>; locations/functions:
     * 1 = alloc_block (S_BIG's string reused: "alloc_big"), 2 = main,
     * 3 + 2i + b = bit i with value b */
    tbuf b = {0};
    value_type(&b, 1, S_ALLOC_OBJ, S_COUNT);
    value_type(&b, 1, S_ALLOC_SPACE, S_BYTES);
    value_type(&b, 1, S_INUSE_OBJ, S_COUNT);
    value_type(&b, 1, S_INUSE_SPACE, S_BYTES);
    uint64_t stack[64];
    const int64_t interval[4] = {1, bytes, 0, 0}, live[4] = {0, 0, 1, bytes};
    for (uint64_t c = 0; c < ((uint64_t)1 << bits); c++) {
        size_t n = 0;
        stack[n++] = 1;
        for (int i = bits - 1; i >= 0; i--)
            stack[n++] = 3 + 2 * (uint64_t)i + ((c >> i) & 1);
        stack[n++] = 2;
        sample(&b, stack, n, interval, true);
        sample(&b, stack, n, live, false);
    }
    for (uint64_t id = 1; id < 3 + 2 * (uint64_t)bits; id++) {
        tbuf loc = {0}, line = {0}, fn = {0};
        int64_t name = id == 1 ? S_BIG : id == 2 ? S_MAIN : S_NSTR + (int64_t)id - 3;
        pbw_varint(&loc, 1, id);
        pbw_varint(&line, 1, id);
        pbw_bytes(&loc, 4, line.p, line.len);
        pbw_bytes(&b, 4, loc.p, loc.len);
        pbw_varint(&fn, 1, id);
        pbw_varint(&fn, 2, (uint64_t)name);
        pbw_varint(&fn, 3, (uint64_t)name);
        pbw_bytes(&b, 5, fn.p, fn.len);
        tbuf_free(&loc);
        tbuf_free(&line);
        tbuf_free(&fn);
    }
    for (int i = 0; i < S_NSTR; i++)
        pbw_str(&b, 6, fixed_strings[i]);
    for (int i = 0; i < bits; i++) {
        for (int v = 0; v < 2; v++) {
            char name[32];
            snprintf(name, sizeof name, "bit%d_%d", i, v);
            pbw_str(&b, 6, name);
        }
    }
    pbw_varint(&b, 9, (uint64_t)time_ns);
    pbw_varint(&b, 10, 10000000000);
    value_type(&b, 11, S_SPACE, S_BYTES);
    pbw_varint(&b, 12, 1024);
    *len = b.len;
    return b.p;
}

void fixed_values(int k, tp_heap_values *v)
{
    *v = (tp_heap_values){
        .alloc_objects = {10 * (k + 1), 1},
        .alloc_space = {1000 * (k + 1), 100000},
        .inuse_objects = {5, 2},
        .inuse_space = {500, 200000},
    };
}
