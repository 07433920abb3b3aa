/* SPDX-License-Identifier: MIT */
/* The fast fill: the load pass for the common image (no metadata words,
 * no per-object shapes), with the careful pass's checks in loops lean
 * enough to stay in registers. */
#define _GNU_SOURCE
#include "pass.h"

#include <stdlib.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* Set bits of x (SWAR: no libgcc call where the CPU baseline lacks popcnt). */
static inline uint64_t popcount64(uint64_t x)
{
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (x * UINT64_C(0x0101010101010101)) >> 56;
}

/* The fill writes every word of the heap's run once, front to back, and
 * never reads one back: on x86-64 the stores are non-temporal (whole lines
 * written to memory without first reading them into the cache). */
#if defined(__x86_64__)
static inline void put(mp_img_word *d, uint64_t v)
{
    _mm_stream_si64((long long *)(void *)d, (long long)v);
}
static inline void put_done(void) { _mm_sfence(); }
#else
static inline void put(mp_img_word *d, uint64_t v) { *d = (mp_img_word)v; }
static inline void put_done(void) {}
#endif

/* The start bit of the object whose unit 0 is word `at`. */
#define MARK_START(at) (starts[(at) / 64] |= (uint64_t)1 << ((at) % 64))

/* The start bits of a run of n objects of `stride` words whose first unit
 * 0 is word a: a periodic pattern, set a word of bits at a time. */
static void mark_run(uint64_t *starts, uint64_t a, uint64_t stride, uint64_t n)
{
    if (n == 0)
        return;
    const uint64_t last = a + (n - 1) * stride;
    if (stride != 2 && stride != 3) {
        for (uint64_t q = a; q <= last; q += stride)
            MARK_START(q);
        return;
    }
    for (uint64_t g = a / 64; g <= last / 64; g++) {
        /* Word g holds bit i for word 64g + i: with stride 2 the bits of
         * a's parity; with stride 3 (64 = 1 mod 3) those with i = a - g. */
        uint64_t m = stride == 2
                         ? (a % 2 ? UINT64_C(0xAAAAAAAAAAAAAAAA) : UINT64_C(0x5555555555555555))
                         : UINT64_C(0x9249249249249249) << ((a % 3 + 3 - g % 3) % 3);
        if (g == a / 64)
            m &= ~(uint64_t)0 << (a % 64);
        if (g == last / 64)
            m &= ~(uint64_t)0 >> (63 - last % 64);
        starts[g] |= m;
    }
}

/* A reference x (checked < nw): its target bit, its address. */
#define REF(x) (targets[(x) / 64] |= (uint64_t)1 << ((x) % 64), (x) ? (uint64_t)(base + (x)) : 0)

/* One object of a run of pairs of references at d: its header word h and
 * the references x and y, each checked < nw; 0 (nothing written) if not. */
static inline int put_pair(mp_img_word *d, uint64_t h, uint64_t x, uint64_t y, uint64_t nw,
                           mp_img_word *base, uint64_t *targets)
{
    if (x >= nw || y >= nw)
        return 0;
    put(d, h);
    put(d + 1, REF(x));
    put(d + 2, REF(y));
    return 1;
}

/* A bytes unit x: 0, or the data of a blob entry with its NUL inside the blob. */
#define BYTES_BAD(x)                                                                               \
    ((x) && ((x) < 8 || (x) % 8 || (x) > nb || img_rd64(blob_src + (x)-8) >= nb - (x) ||           \
             blob_src[(x) + img_rd64(blob_src + (x)-8)] != 0))

/* The fill for the common case (no metadata words, no per-object shapes):
 * the same checks as the careful pass (pass.c), in a loop lean enough for the compiler
 * to keep in registers. The writer lays the region out type by type, in
 * runs (one header word, a count, the units): the commonest shapes (two
 * references, packed or not, one word, a word and bytes) have a loop of
 * their own over a window's worth of a run, with no header word to read or
 * compare per object, and start bits set a word at a time. Any anomaly
 * stops it (-1) and
 * the load is refused with what the careful pass (img_view_check_objects)
 * finds; 0 when the region is sound, its checksum included. */
int img_fast_fill(struct pass *ps)
{
    const struct img_view *v = ps->v;
    const uint64_t nw = v->words, nf = v->hd.n_foreign, nb = v->hd.n_bytes;
    const size_t region_at = (size_t)(v->objects_at - v->data);
    const unsigned char *const src = v->objects_at;
    mp_img_word *const base = ps->base;
    const unsigned char *const blob = ps->blob;
    /* The byte blob first, in one sequential copy: the bytes units are
     * then checked against the heap's copy, in the cache, rather than at
     * random places of the file. */
    if (blob) {
        memcpy(ps->blob, v->blob_at, (size_t)nb);
        ps->blob_copied = 1;
    }
    const unsigned char *const blob_src = blob ? blob : v->blob_at;
    const uintptr_t *const fvals = ps->fvals;
    uint64_t *const starts = ps->starts, *const targets = ps->targets;
    const struct plan *const plans = ps->plans;
    const uint32_t tmask = ps->tmask;
    const uint64_t fw = v->file_words;
    uint64_t p = 0, f = 0, window = 0; /* memory word, file word */
    int bad = 0;

    img_pass_hash_to(ps, region_at);
    while (f < fw && !bad) {
        if (f >= window) {
            window = fw - f > WINDOW / 8 ? f + WINDOW / 8 : fw;
            img_pass_hash_to(ps, region_at + 8 * window);
        }
        uint64_t h = img_rd64(src + 8 * f++), n = 1;
        struct img_obj o;
        memcpy(&o, &h, sizeof o);
        const int runs = (o.flags & IMG_RUN) != 0;
        if (runs) { /* n objects with this header word */
            o.flags &= (uint16_t)~IMG_RUN;
            memcpy(&h, &o, sizeof h);
            if (f >= fw) {
                bad = 1;
                break;
            }
            n = img_rd64(src + 8 * f++);
        }
        const struct plan *pl = &plans[o.type & tmask];
        const uint64_t units = o.units;
        const int packed = runs && pl->code == PLAN_FIXED && pl->shape.mask == 0;
        if ((h & pl->hmask) != pl->expect ||
            (runs && (n < 2 || pl->code != PLAN_FIXED || units == 0)) ||
            (units && n > (packed ? 2 * (fw - f) : fw - f) / units) || n > (nw - p) / (1 + units)) {
            bad = 1;
            break;
        }
        if (packed) { /* references of 32 bits, a window's worth at a time */
            const unsigned char *rp = src + 8 * f;
            f += img_run_words(1, n, units);
            if (n * units % 2 && img_rd32(src + 8 * f - 4) != 0) {
                bad = 1;
                break;
            }
            for (uint64_t left = n; left && !bad;) {
                const size_t pos = (size_t)(rp - v->data);
                if (pos + 4 * units > ps->hashed)
                    img_pass_hash_to(ps, v->len - pos > WINDOW ? pos + WINDOW : v->len);
                uint64_t m = (ps->hashed - pos) / (4 * units) + 1, x;
                if (m > left)
                    m = left;
                left -= m;
                const uint64_t p0 = p;
                if (units == 2) {
                    for (uint64_t j = 0; j < m; j++, rp += 8, p += 3) {
                        if (!put_pair(base + p, h, img_rd32(rp), img_rd32(rp + 4), nw, base,
                                      targets)) {
                            bad = 1;
                            break;
                        }
                    }
                    mark_run(starts, p0 + 1, 3, (p - p0) / 3);
                    continue;
                }
                for (uint64_t j = 0; j < m && !bad; j++, rp += 4 * units, p += 1 + units) {
                    put(base + p, h);
                    MARK_START(p + 1);
                    for (uint64_t u = 0; u < units; u++) {
                        x = img_rd32(rp + 4 * u);
                        if (x >= nw) {
                            bad = 1;
                            break;
                        }
                        put(base + p + 1 + u, REF(x));
                    }
                }
            }
            continue;
        }
        /* The objects of the run, a window's worth at a time. */
        for (uint64_t left = n; left && !bad;) {
            if (f >= window && f < fw) {
                window = fw - f > WINDOW / 8 ? f + WINDOW / 8 : fw;
                img_pass_hash_to(ps, region_at + 8 * window);
            }
            uint64_t m = left;
            if (m > 1 && units && f < window && (window - f + units - 1) / units < m)
                m = (window - f + units - 1) / units; /* those starting in the window */
            left -= m;
            const uint64_t p0 = p;
            uint64_t x;
            switch (pl->fast) {
            case FAST_REF2: /* pairs of references */
                for (uint64_t j = 0; j < m; j++, f += 2, p += 3) {
                    if (!put_pair(base + p, h, img_rd64(src + 8 * f), img_rd64(src + 8 * f + 8), nw,
                                  base, targets)) {
                        bad = 1;
                        break;
                    }
                }
                mark_run(starts, p0 + 1, 3, (p - p0) / 3);
                continue;
            case FAST_WORD1:
                for (uint64_t j = 0; j < m; j++, f += 1, p += 2) {
                    put(base + p, h);
                    put(base + p + 1, img_rd64(src + 8 * f));
                }
                mark_run(starts, p0 + 1, 2, m);
                continue;
            case FAST_WORD_BYTES:
                for (uint64_t j = 0; j < m; j++, f += 2, p += 3) {
                    x = img_rd64(src + 8 * f + 8);
                    if (BYTES_BAD(x)) {
                        bad = 1;
                        break;
                    }
                    put(base + p, h);
                    put(base + p + 1, img_rd64(src + 8 * f));
                    put(base + p + 2, x ? (uint64_t)(blob + x) : 0);
                }
                mark_run(starts, p0 + 1, 3, (p - p0) / 3);
                continue;
            default:
                break;
            }
            for (uint64_t j = 0; j < m && !bad; j++) {
                const unsigned char *const us = src + 8 * f;
                mp_img_word *const dst = base + p + 1;
                put(dst - 1, h);
                MARK_START(p + 1);
                p += 1 + units;
                f += units;
                uint64_t u = 0;
                if (pl->code == PLAN_DYNAMIC && (units < 1 || img_rd64(us) != units - 1)) {
                    bad = 1;
                    break;
                }
                const uint64_t head = pl->head < units ? pl->head : units;
                for (; u < head && !bad; u++) {
                    x = img_rd64(us + 8 * u);
                    switch (pl->kinds[u]) {
                    case MP_IMG_REF:
                        bad = x >= nw;
                        put(dst + u, bad ? 0 : REF(x));
                        break;
                    case MP_IMG_WORD:
                        put(dst + u, x);
                        break;
                    case MP_IMG_BYTES:
                        bad = BYTES_BAD(x);
                        put(dst + u, x ? (uint64_t)(blob + x) : 0);
                        break;
                    default:
                        bad = x > nf;
                        put(dst + u, bad ? 0 : fvals[x]);
                        break;
                    }
                }
                switch (pl->tail) {
                case MP_IMG_REF:
                    for (; u < units && !bad; u++) {
                        x = img_rd64(us + 8 * u);
                        bad = x >= nw;
                        put(dst + u, bad ? 0 : REF(x));
                    }
                    break;
                case MP_IMG_WORD:
                    for (; u < units; u++)
                        put(dst + u, img_rd64(us + 8 * u));
                    break;
                case MP_IMG_BYTES:
                    for (; u < units && !bad; u++) {
                        x = img_rd64(us + 8 * u);
                        bad = BYTES_BAD(x);
                        put(dst + u, x ? (uint64_t)(blob + x) : 0);
                    }
                    break;
                default:
                    for (; u < units && !bad; u++) {
                        x = img_rd64(us + 8 * u);
                        bad = x > nf;
                        put(dst + u, bad ? 0 : fvals[x]);
                    }
                    break;
                }
            }
        }
    }
    if (p != nw)
        bad = 1;
    put_done();
    if (bad)
        return -1;
    /* As many objects as the header says, the whole file as its writer
     * wrote it, every reference at an object, every root an object. */
    uint64_t objects = 0;
    for (uint64_t g = 0; g < (nw + 63) / 64; g++)
        objects += popcount64(starts[g]);
    if (objects != v->hd.n_objects)
        return -1;
    img_pass_hash_to(ps, v->len);
    if (img_hash_final(&ps->hash) != v->hd.checksum)
        return -1;
    if (nw) {
        targets[0] &= ~(uint64_t)1;
        for (uint64_t g = 0; g < (nw + 63) / 64; g++)
            if (targets[g] & ~starts[g])
                return -1;
    }
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        uint64_t x = v->roots[r].index;
        if (x && !((starts[x / 64] >> (x % 64)) & 1))
            return -1;
    }
    return 0;
}
#undef MARK_START
#undef REF
#undef BYTES_BAD
