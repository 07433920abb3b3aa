/* SPDX-License-Identifier: MIT */
/* The unpacked size of a pprof message, from its wire bytes
 * (pprof_bound.h). Field numbers: profile.proto. */
#include "pprof_bound.h"

#include <stdbool.h>

#include "profile.pb-c.h"

typedef struct {
    const uint8_t *p, *end;
} wire;

static bool varint(wire *w, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Skips a field of wire type `wt`; for length-delimited ones sets *sub to
 * its payload. */
static bool field(wire *w, unsigned wt, wire *sub)
{
    uint64_t v;
    switch (wt) {
    case 0:
        return varint(w, &v);
    case 1:
        if (w->end - w->p < 8)
            return false;
        w->p += 8;
        return true;
    case 5:
        if (w->end - w->p < 4)
            return false;
        w->p += 4;
        return true;
    case 2:
        if (!varint(w, &v) || v > (uint64_t)(w->end - w->p))
            return false;
        sub->p = w->p;
        sub->end = w->p + v;
        w->p += v;
        return true;
    default:
        return false;
    }
}

/* Varints in a packed payload (each element is at least one byte). */
static size_t packed_count(wire sub)
{
    size_t n = 0;
    for (const uint8_t *q = sub.p; q < sub.end; q++)
        n += !(*q & 0x80);
    return n;
}

/* A message whose repeated scalar fields are `scalars` (a bit set of
 * field numbers < 32) and repeated message fields `msgs` (each costs
 * `msg_size`): its unpacked size beyond its own struct. */
static size_t inner(wire w, uint32_t scalars, uint32_t msgs, size_t msg_size, bool *bad)
{
    size_t cost = 0;
    while (w.p < w.end) {
        uint64_t key;
        wire sub;
        if (!varint(&w, &key) || !field(&w, (unsigned)(key & 7), &sub)) {
            *bad = true;
            return 0;
        }
        uint64_t f = key >> 3;
        if (f >= 32)
            continue;
        if (scalars & (1u << f))
            cost += sizeof(uint64_t) * ((key & 7) == 2 ? packed_count(sub) : 1);
        else if (msgs & (1u << f))
            cost += msg_size + sizeof(void *);
    }
    return cost;
}

size_t mpt_pprof_decoded_size(const uint8_t *data, size_t len)
{
    wire w = {data, data + len};
    size_t cost = sizeof(Perftools__Profiles__Profile);
    bool bad = false;
    while (w.p < w.end && !bad) {
        uint64_t key;
        wire sub = {0};
        if (!varint(&w, &key) || !field(&w, (unsigned)(key & 7), &sub))
            return SIZE_MAX;
        unsigned wt = (unsigned)(key & 7);
        switch (key >> 3) {
        case 1:  /* sample_type */
        case 11: /* period_type */
            cost += sizeof(Perftools__Profiles__ValueType) + sizeof(void *);
            break;
        case 2: /* sample: location_id (1), value (2), label (3) */
            cost += sizeof(Perftools__Profiles__Sample) + sizeof(void *);
            if (wt == 2)
                cost += inner(sub, 1u << 1 | 1u << 2, 1u << 3, sizeof(Perftools__Profiles__Label),
                              &bad);
            break;
        case 3:
            cost += sizeof(Perftools__Profiles__Mapping) + sizeof(void *);
            break;
        case 4: /* location: line (4) */
            cost += sizeof(Perftools__Profiles__Location) + sizeof(void *);
            if (wt == 2)
                cost += inner(sub, 0, 1u << 4, sizeof(Perftools__Profiles__Line), &bad);
            break;
        case 5:
            cost += sizeof(Perftools__Profiles__Function) + sizeof(void *);
            break;
        case 6: /* string_table */
            cost += (size_t)(sub.end - sub.p) + 1 + sizeof(char *);
            break;
        case 13: /* comment */
            cost += sizeof(int64_t) * (wt == 2 ? packed_count(sub) : 1);
            break;
        default:
            break;
        }
    }
    return bad ? SIZE_MAX : cost;
}
