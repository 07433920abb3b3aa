/* SPDX-License-Identifier: MIT */
/* The fixed test profiles and their values, encoded by hand (what comes
 * back is read with the workspace's decoder, pprof_decode.h). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return tp_build_wide_n(bits, (uint64_t)1 << bits, bytes, time_ns, len);
}

uint8_t *tp_build_wide_n(int bits, uint64_t count, int64_t bytes, int64_t time_ns, size_t *len)
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
    for (uint64_t c = 0; c < count; c++) {
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
