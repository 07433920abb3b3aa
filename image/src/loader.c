/* The loader: verify and arm (view.c), resolve foreign, allocate, then one
 * pass over the object region that copies it into the heap, relocating
 * every unit by its kind, and hashes the file as it goes.
 *
 * Order is the contract: nothing is allocated before every header field,
 * the sizes, the head checksum and the tables have passed; every foreign
 * entry is reacquired before the heap memory is allocated. The region is
 * the heap's own layout (metadata, header word, units per object; a run
 * stores the header word once for all its objects, and an all-reference
 * run its units in 32 bits), so the pass is a copy in which every header
 * word is checked against the type table and every unit is range-checked
 * before it is used; a reference is
 * a word offset into the region, and must name the unit 0 of an object of
 * the region (checked in bulk at the end: one bit per word a reference
 * names, one per object start). Identity comes from the offsets: one
 * offset is one address, however many units name it. The checksum of the
 * whole file is confirmed before the heap is handed out, and if the file
 * is damaged the checksum refusal takes precedence over whatever else the
 * pass found. */
#define _GNU_SOURCE
#include "view.h"

#include "checksum.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* File bytes hashed ahead of the objects that read them: small enough to
 * stay in the second-level cache while the objects are placed. */
#define WINDOW ((size_t)128 << 10)

/* How the pass treats a type: its sound header word, and its units as a
 * head of up to 32 units of any kind followed by a tail of one kind. */
enum plan_code {
    PLAN_NONE,    /* no shape (or no such type): any instance is corrupt */
    PLAN_FIXED,   /* fixed count (in the header word compared) */
    PLAN_DYNAMIC, /* slot 0 counts the units after it */
    PLAN_CUSTOM,  /* shape from the shape table */
};

/* The fast fill's own cases (fast_fill), beside the plan's general ones. */
enum fast_code {
    FAST_GENERAL,    /* head and tail */
    FAST_REF2,       /* fixed: two references */
    FAST_WORD1,      /* fixed: one word */
    FAST_WORD_BYTES, /* fixed: a word, then bytes */
};

struct plan {
    uint64_t hmask, expect; /* a sound header word h has (h & hmask) == expect */
    unsigned fast;
    unsigned code;
    uint32_t head;      /* units before the tail */
    unsigned tail;      /* the kind of every later unit */
    mp_img_shape shape; /* FIXED, DYNAMIC */
    unsigned char kinds[MP_IMG_MASK_UNITS];
};

struct pass {
    const struct img_view *v;
    struct plan *plans; /* tmask + 1 of them: a type index is masked, not compared */
    uint32_t tmask;
    mp_img_word *base;      /* fill: the heap's run (the region's copy) */
    unsigned char *blob;    /* fill: the heap's copy of the byte blob */
    const uintptr_t *fvals; /* fill: foreign values; fvals[0] = 0 */
    uint64_t *starts;       /* one bit per region word: unit 0 of an object */
    uint64_t *targets;      /* one bit per region word a reference names */
    struct img_hash hash;
    int targets_in_heap; /* targets lies in the heap's block (freed with it) */
    size_t hashed;       /* file bytes [IMG_CHECKSUM_FROM, hashed) are hashed */
    int blob_copied;     /* the blob is in the heap already */
};

static uint64_t header_word(uint32_t units, uint16_t type, uint16_t flags)
{
    struct img_obj o = {units, type, flags};
    uint64_t h;
    memcpy(&h, &o, sizeof h);
    return h;
}

/* The head and tail of a shape: kinds[u] for u < head, then `tail`. */
static void split(const mp_img_shape *s, struct plan *pl)
{
    if (s->mask == 0) {
        pl->head = 0;
        pl->tail = MP_IMG_REF;
        return;
    }
    for (uint32_t u = 0; u < s->described; u++)
        pl->kinds[u] = (unsigned char)img_kind(s, u);
    pl->tail = pl->kinds[s->described - 1];
    pl->head = s->described - 1;
    while (pl->head > 0 && pl->kinds[pl->head - 1] == pl->tail)
        pl->head--;
}

static struct plan *make_plans(const struct img_view *v, uint32_t *tmask)
{
    uint32_t n = 1;
    while (n < v->hd.n_types)
        n *= 2;
    *tmask = n - 1;
    struct plan *pl = calloc(n, sizeof *pl);
    if (!pl)
        return NULL;
    /* Compared: the type, the library's flag bit, and the count when it
     * is fixed; not the user flags. */
    const uint64_t all = header_word(UINT32_MAX, UINT16_MAX, (uint16_t)~MP_IMG_USER_FLAGS);
    const uint64_t no_units = header_word(0, UINT16_MAX, (uint16_t)~MP_IMG_USER_FLAGS);
    for (uint32_t t = 0; t < n; t++) {
        pl[t].code = PLAN_NONE;
        pl[t].hmask = 0; /* never sound */
        pl[t].expect = 1;
        if (t >= v->hd.n_types)
            continue;
        const struct img_vtype *vt = &v->types[t];
        pl[t].shape = vt->shape;
        switch (vt->shape_class) {
        case IMG_SHAPE_FIXED:
            pl[t].code = PLAN_FIXED;
            pl[t].hmask = all;
            pl[t].expect = header_word(vt->shape.count, (uint16_t)t, 0);
            split(&vt->shape, &pl[t]);
            if (pl[t].head == 0 && vt->shape.count == 2 && pl[t].tail == MP_IMG_REF)
                pl[t].fast = FAST_REF2;
            else if (pl[t].head == 0 && vt->shape.count == 1 && pl[t].tail == MP_IMG_WORD)
                pl[t].fast = FAST_WORD1;
            else if (pl[t].head == 1 && vt->shape.count == 2 && pl[t].kinds[0] == MP_IMG_WORD &&
                     pl[t].tail == MP_IMG_BYTES)
                pl[t].fast = FAST_WORD_BYTES;
            break;
        case IMG_SHAPE_DYNAMIC:
            pl[t].code = PLAN_DYNAMIC;
            pl[t].hmask = no_units;
            pl[t].expect = header_word(0, (uint16_t)t, 0);
            split(&vt->shape, &pl[t]);
            break;
        case IMG_SHAPE_CUSTOM:
            pl[t].code = PLAN_CUSTOM;
            pl[t].hmask = no_units;
            pl[t].expect = header_word(0, (uint16_t)t, 0);
            break;
        default:
            break;
        }
    }
    return pl;
}

/* Hashes the file up to `upto`, copying what lies in the byte blob to the
 * heap's copy of it while it is in the cache. */
static void hash_to(struct pass *ps, size_t upto)
{
    const struct img_view *v = ps->v;
    size_t blob_at = (size_t)(v->blob_at - v->data);
    while (ps->hashed < upto) {
        size_t n = upto - ps->hashed < WINDOW ? upto - ps->hashed : WINDOW;
        img_hash_update(&ps->hash, v->data + ps->hashed, n);
        if (ps->blob && !ps->blob_copied && ps->hashed + n > blob_at) {
            size_t from = ps->hashed > blob_at ? ps->hashed : blob_at;
            memcpy(ps->blob + (from - blob_at), v->data + from, ps->hashed + n - from);
        }
        ps->hashed += n;
    }
}

static mp_img_status bad_checksum(mp_img_error *err)
{
    return img_fail(err, MP_IMG_ERR_CHECKSUM,
                    "header field 'checksum' does not match the contents");
}

/* The first reference of the region that names no object's unit 0 (the
 * bulk check found one); every object is known sound by now. */
static mp_img_status name_bad_ref(const struct pass *ps, mp_img_error *err)
{
    const struct img_view *v = ps->v;
    size_t shape = 0;
    struct img_walk it;
    struct img_obj o;
    uint64_t at;
    const unsigned char *us;
    img_walk_init(&it, v);
    for (uint64_t i = 1; img_walk_next(&it, &o, &at, &us); i++) {
        const struct plan *pl = &ps->plans[o.type & ps->tmask];
        mp_img_shape s = pl->shape;
        if (pl->code == PLAN_CUSTOM) {
            s = (mp_img_shape){false, o.units, (uint32_t)img_rd64(v->shapes_at + 16 * shape),
                               img_rd64(v->shapes_at + 16 * shape + 8)};
            shape++;
        }
        for (uint32_t u = 0; u < o.units; u++) {
            uint64_t x = it.packed ? img_rd32(us + 4 * u) : img_rd64(us + 8 * u);
            if (img_kind(&s, u) == MP_IMG_REF && x && !((ps->starts[x / 64] >> (x % 64)) & 1))
                return img_fail(err, MP_IMG_ERR_CORRUPT,
                                "object %llu unit %u: reference to word %llu of the region, "
                                "which is not an object",
                                (unsigned long long)i, (unsigned)u, (unsigned long long)x);
        }
    }
    return img_fail(err, MP_IMG_ERR_CORRUPT, "a reference names no object");
}

/* One unit of kind k at value x: checked, then (fill) relocated into *d. */
#define UNIT_CASES(k, x, d, fail_ref, fail_bytes, fail_foreign)                                    \
    switch (k) {                                                                                   \
    case MP_IMG_REF:                                                                               \
        if (x >= nw)                                                                               \
            goto fail_ref;                                                                         \
        targets[x / 64] |= (uint64_t)1 << (x % 64);                                                \
        if (fill)                                                                                  \
            *(d) = x ? (mp_img_word)(base + x) : 0;                                                \
        break;                                                                                     \
    case MP_IMG_WORD:                                                                              \
        if (fill)                                                                                  \
            *(d) = (mp_img_word)x;                                                                 \
        break;                                                                                     \
    case MP_IMG_BYTES:                                                                             \
        if (x) {                                                                                   \
            /* The data at x, its length in the word before, and a NUL right                       \
             * after it, all inside the blob. */                                                   \
            if (x < 8 || x % 8 || x > nb)                                                          \
                goto fail_bytes;                                                                   \
            uint64_t len_ = img_rd64(blob_src + x - 8);                                            \
            if (len_ >= nb - x || blob_src[x + len_] != 0)                                         \
                goto fail_bytes;                                                                   \
        }                                                                                          \
        if (fill)                                                                                  \
            *(d) = x ? (mp_img_word)(blob + x) : 0;                                                \
        break;                                                                                     \
    default: /* MP_IMG_FOREIGN */                                                                  \
        if (x > nf)                                                                                \
            goto fail_foreign;                                                                     \
        if (fill)                                                                                  \
            *(d) = fvals[x]; /* fvals[0] is 0: nil */                                              \
        break;                                                                                     \
    }

/* The pass. With `fill` it writes every object into ps->base; without, it
 * only checks (verify). A refusal found on the way stands only if the file
 * is what its writer wrote: damage is reported as damage. */
static inline __attribute__((always_inline)) mp_img_status
region_pass(struct pass *ps, mp_img_error *err, const int fill, const int no_meta)
{
    const struct img_view *v = ps->v;
    const uint64_t nw = v->words, nf = v->hd.n_foreign, nb = v->hd.n_bytes, nt = v->hd.n_types;
    const uint64_t n_shapes = v->hd.shapes_size / 16;
    const size_t w = no_meta ? 0 : v->hd.meta_width;
    const size_t region_at = (size_t)(v->objects_at - v->data);
    const unsigned char *const src = v->objects_at;
    const unsigned char *const blob_src = v->blob_at;
    mp_img_word *const base = fill ? ps->base : NULL;
    const unsigned char *const blob = fill ? ps->blob : NULL;
    const uintptr_t *const fvals = fill ? ps->fvals : NULL;
    uint64_t *const starts = ps->starts, *const targets = ps->targets;
    const struct plan *const plans = ps->plans;
    const uint32_t tmask = ps->tmask;
    const uint64_t fw = v->file_words;
    uint64_t shape = 0, i = 0, p = 0, f = 0, run_left = 0, run_h = 0;
    const unsigned char *rnext = NULL; /* the units of the next object of a run */
    int packed = 0;                    /* the current run's units are 32-bit */
    mp_img_status st;

    hash_to(ps, region_at);
    while (f < fw || run_left) {
        { /* hashed a window ahead of what is read */
            const size_t at = (size_t)((run_left ? rnext : src + 8 * f) - v->data);
            if (at + 64 > ps->hashed)
                hash_to(ps, v->len - at > WINDOW ? at + WINDOW : v->len);
        }
        i++;
        if (nw - p < w + 1 || (!run_left && fw - f < w + 1)) {
            st = img_fail(err, MP_IMG_ERR_CORRUPT,
                          "object %llu: its header is past the end of the region",
                          (unsigned long long)i);
            goto fail;
        }
        uint64_t h, run = 0; /* the count, at the first object of a run */
        int runs = 0;        /* this object starts a run */
        const int inrun = run_left != 0;
        if (run_left) {
            h = run_h;
            run_left--;
        } else {
            h = img_rd64(src + 8 * (f + w));
            f += w + 1;
            struct img_obj r;
            memcpy(&r, &h, sizeof r);
            if (r.flags & IMG_RUN) {
                r.flags &= (uint16_t)~IMG_RUN;
                memcpy(&h, &r, sizeof h);
                if (f >= fw) {
                    st = img_fail(err, MP_IMG_ERR_CORRUPT,
                                  "object %llu: its run count is past the end of the region",
                                  (unsigned long long)i);
                    goto fail;
                }
                run = img_rd64(src + 8 * f++);
                runs = 1;
            }
        }
        struct img_obj o;
        memcpy(&o, &h, sizeof o);
        const struct plan *pl = &plans[o.type & tmask];
        if ((h & pl->hmask) != pl->expect)
            goto bad_header;
        const uint64_t at = p + w + 1;
        const uint32_t units = o.units;
        if (runs) {
            if (w || pl->code != PLAN_FIXED) {
                st = img_fail(err, MP_IMG_ERR_CORRUPT,
                              "object %llu: a run of type '%.*s', which has %s",
                              (unsigned long long)i, (int)v->types[o.type].name_len,
                              v->types[o.type].name, w ? "metadata words" : "no fixed shape");
                goto fail;
            }
            packed = img_run_packed(&v->types[o.type]);
            if (run < 2 || units == 0 || run > (packed ? 2 * (fw - f) : fw - f) / units ||
                run > (nw - p) / (1 + units)) {
                st = img_fail(err, MP_IMG_ERR_CORRUPT,
                              "object %llu: a run of %llu objects of %u units does not fit the "
                              "region",
                              (unsigned long long)i, (unsigned long long)run, (unsigned)units);
                goto fail;
            }
            rnext = src + 8 * f;
            f += img_run_words(packed, run, units);
            if (packed && run * units % 2 && img_rd32(src + 8 * f - 4) != 0) {
                st = img_fail(err, MP_IMG_ERR_CORRUPT,
                              "object %llu: the padding after its run is not zero",
                              (unsigned long long)i);
                goto fail;
            }
            run_left = run - 1;
            run_h = h;
        }
        const int packed_obj = (runs || inrun) && packed;
        if (units > nw - at || (!runs && !inrun && units > fw - f)) {
            st = img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: its %u units overrun the region",
                          (unsigned long long)i, (unsigned)units);
            goto fail;
        }
        const unsigned char *const us = runs || inrun ? rnext : src + 8 * f;
        if (runs || inrun)
            rnext += (packed ? 4 : 8) * (size_t)units;
        else
            f += units;
        mp_img_word *const dst = fill ? base + at : NULL;
        if (fill) { /* metadata, imaged as words (never in a run), and the header */
            for (size_t m = 0; m < w; m++)
                dst[(ptrdiff_t)m - 1 - (ptrdiff_t)w] = img_rd64(us - 8 * (w + 1 - m));
            dst[-1] = h;
        }
        starts[at / 64] |= (uint64_t)1 << (at % 64);
        p = at + units;
        uint32_t u = 0, head = pl->head;
        unsigned tail = pl->tail;
        uint64_t x = 0;
        const unsigned char *kinds = pl->kinds;
        mp_img_shape custom;
        if (pl->code != PLAN_FIXED) {
            if (pl->code == PLAN_DYNAMIC) {
                if (units < 1 || img_rd64(us) != (uint64_t)units - 1) {
                    if (units < 1)
                        goto contradicts;
                    st = img_fail(err, MP_IMG_ERR_CORRUPT,
                                  "object %llu: slot-0 count %llu contradicts its %u units",
                                  (unsigned long long)i, (unsigned long long)img_rd64(us),
                                  (unsigned)units);
                    goto fail;
                }
            } else { /* PLAN_CUSTOM */
                if (shape >= n_shapes) {
                    st = img_fail(err, MP_IMG_ERR_CORRUPT,
                                  "object %llu: the shape table has no entry for it",
                                  (unsigned long long)i);
                    goto fail;
                }
                uint64_t described = img_rd64(v->shapes_at + 16 * shape);
                uint64_t mask = img_rd64(v->shapes_at + 16 * shape + 8);
                shape++;
                custom = (mp_img_shape){false, units, (uint32_t)described, mask};
                mp_img_shape canon = custom;
                if (described > MP_IMG_MASK_UNITS || img_shape_check(&custom, NULL) != MP_IMG_OK ||
                    (img_shape_canon(&canon), !img_shape_equal(&canon, &custom))) {
                    st = img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: bad per-object shape",
                                  (unsigned long long)i);
                    goto fail;
                }
                /* Its kinds, unit by unit, through the head. */
                head = units;
                tail = MP_IMG_WORD;
                for (; u < units; u++) {
                    x = img_rd64(us + 8 * (size_t)u);
                    unsigned k = img_kind(&custom, u);
                    UNIT_CASES(k, x, dst + u, bad_ref, bad_bytes, bad_foreign)
                }
                continue;
            }
        }
        /* The head: a few units of any kind. */
        if (head > units)
            head = units;
        for (; u < head; u++) {
            x = img_rd64(us + 8 * (size_t)u);
            unsigned k = kinds[u];
            UNIT_CASES(k, x, dst + u, bad_ref, bad_bytes, bad_foreign)
        }
        /* The tail: one kind, one tight loop. */
        switch (tail) {
        case MP_IMG_REF:
            for (; u < units; u++) {
                x = packed_obj ? img_rd32(us + 4 * (size_t)u) : img_rd64(us + 8 * (size_t)u);
                if (x >= nw)
                    goto bad_ref;
                targets[x / 64] |= (uint64_t)1 << (x % 64);
                if (fill)
                    dst[u] = x ? (mp_img_word)(base + x) : 0;
            }
            break;
        case MP_IMG_WORD:
            if (fill)
                for (; u < units; u++)
                    dst[u] = img_rd64(us + 8 * (size_t)u);
            break;
        default:
            for (; u < units; u++) {
                x = img_rd64(us + 8 * (size_t)u);
                UNIT_CASES(tail, x, dst + u, bad_ref, bad_bytes, bad_foreign)
            }
            break;
        }
        continue;
    bad_header:
        if (o.type >= nt)
            st = img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: type index %u out of range",
                          (unsigned long long)i, (unsigned)o.type);
        else if (o.flags & ~MP_IMG_USER_FLAGS)
            st = img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: flags 0x%x are not user flags",
                          (unsigned long long)i, (unsigned)o.flags);
        else
            goto contradicts;
        goto fail;
    contradicts:
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "object %llu: %u units contradict the shape of type '%.*s'",
                      (unsigned long long)i, (unsigned)o.units, (int)v->types[o.type].name_len,
                      v->types[o.type].name);
        goto fail;
    bad_ref:
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "object %llu unit %u: reference to word %llu of a %llu-word region",
                      (unsigned long long)i, (unsigned)u, (unsigned long long)x,
                      (unsigned long long)nw);
        goto fail;
    bad_bytes:
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "object %llu unit %u: bytes offset %llu is not a blob entry",
                      (unsigned long long)i, (unsigned)u, (unsigned long long)x);
        goto fail;
    bad_foreign:
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "object %llu unit %u: foreign index %llu out of range", (unsigned long long)i,
                      (unsigned)u, (unsigned long long)x);
        goto fail;
    }
    if (i != v->hd.n_objects) {
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "the region holds %llu objects, the header declares %llu",
                      (unsigned long long)i, (unsigned long long)v->hd.n_objects);
        goto fail;
    }
    if (p != nw) {
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "header field 'region words' is %llu, the region's objects take %llu",
                      (unsigned long long)nw, (unsigned long long)p);
        goto fail;
    }
    if (shape != n_shapes) {
        st = img_fail(err, MP_IMG_ERR_CORRUPT,
                      "the shape table has %llu entries, the region's objects use %llu",
                      (unsigned long long)n_shapes, (unsigned long long)shape);
        goto fail;
    }
    hash_to(ps, v->len);
    if (img_hash_final(&ps->hash) != v->hd.checksum)
        return bad_checksum(err);
    /* Every word a reference names is an object's unit 0 (bit 0 is nil). */
    if (nw) {
        targets[0] &= ~(uint64_t)1;
        for (uint64_t g = 0; g < (nw + 63) / 64; g++)
            if (targets[g] & ~starts[g])
                return name_bad_ref(ps, err);
    }
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        uint64_t x = v->roots[r].index;
        if (x && !((starts[x / 64] >> (x % 64)) & 1))
            return img_fail(err, MP_IMG_ERR_CORRUPT,
                            "root table: entry %llu names word %llu, which is not an object",
                            (unsigned long long)r, (unsigned long long)x);
    }
    return MP_IMG_OK;
fail:
    hash_to(ps, v->len);
    return img_hash_final(&ps->hash) != v->hd.checksum ? bad_checksum(err) : st;
}
#undef UNIT_CASES

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
 * the same checks as region_pass, in a loop lean enough for the compiler
 * to keep in registers. The writer lays the region out type by type, in
 * runs (one header word, a count, the units): the commonest shapes (two
 * references, packed or not, one word, a word and bytes) have a loop of
 * their own over a window's worth of a run, with no header word to read or
 * compare per object, and start bits set a word at a time. Any anomaly
 * stops it (-1) and
 * the load is refused with what the careful pass (img_view_check_objects)
 * finds; 0 when the region is sound, its checksum included. */
static int fast_fill(struct pass *ps)
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

    hash_to(ps, region_at);
    while (f < fw && !bad) {
        if (f >= window) {
            window = fw - f > WINDOW / 8 ? f + WINDOW / 8 : fw;
            hash_to(ps, region_at + 8 * window);
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
                    hash_to(ps, v->len - pos > WINDOW ? pos + WINDOW : v->len);
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
                hash_to(ps, region_at + 8 * window);
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
    hash_to(ps, v->len);
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

/* Bits for every word of the region, zeroed. */
static uint64_t *region_bits(const struct img_view *v)
{
    return calloc((size_t)(v->words + 63) / 64 + 1, sizeof(uint64_t));
}

static mp_img_status pass_begin(struct pass *ps, const struct img_view *v, int targets,
                                mp_img_error *err)
{
    memset(ps, 0, sizeof *ps);
    ps->v = v;
    ps->hashed = IMG_CHECKSUM_FROM;
    img_hash_init(&ps->hash);
    ps->plans = make_plans(v, &ps->tmask);
    if (targets)
        ps->targets = region_bits(v);
    if (!ps->plans || (targets && !ps->targets))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory checking %llu objects",
                        (unsigned long long)v->hd.n_objects);
    return MP_IMG_OK;
}

static void pass_end(struct pass *ps)
{
    free(ps->plans);
    if (!ps->targets_in_heap)
        free(ps->targets);
}

mp_img_status img_view_check_objects(const struct img_view *v, mp_img_error *err)
{
    struct pass ps;
    mp_img_status st = pass_begin(&ps, v, 1, err);
    uint64_t *starts = st == MP_IMG_OK ? region_bits(v) : NULL;
    if (st == MP_IMG_OK && !starts)
        st = img_fail(err, MP_IMG_ERR_NOMEM, "out of memory checking %llu objects",
                      (unsigned long long)v->hd.n_objects);
    if (st == MP_IMG_OK) {
        ps.starts = starts;
        st = v->hd.meta_width ? region_pass(&ps, err, 0, 0) : region_pass(&ps, err, 0, 1);
    }
    free(starts);
    pass_end(&ps);
    return st;
}

/* Resolve foreign: every entry reacquired by name, before any object. The
 * `code` entries come last, against the modules loaded by then (including
 * any a dlsym entry just opened), so the result does not depend on the
 * order of the table. */
/* An entry of a kind the registry refuses (mp_img_registry_allow_foreign),
 * named in the detail; checked for the whole table before any entry is
 * reacquired, so a refused image opens no library. */
static mp_img_status refuse_foreign(const mp_img_registry *reg, const struct img_view *v,
                                    mp_img_error *err)
{
    static const char *const kind_name[] = {"nil", "dlsym", "fd", "code", "callback"};
    for (uint64_t k = 0; k < v->hd.n_foreign; k++) {
        const struct img_foreign *f = &v->foreign[k];
        if (f->kind > IMG_FOREIGN_EXT || !(reg->refused_foreign & (1u << f->kind)))
            continue;
        if (f->kind == IMG_FOREIGN_DLSYM) {
            const char *lib = f->a_len ? (const char *)f->a : "<main program>";
            int la = f->a_len ? (f->a_len > 200 ? 200 : (int)f->a_len) : (int)strlen(lib);
            int lb = f->b_len > 200 ? 200 : (int)f->b_len;
            return img_fail(err, MP_IMG_ERR_FOREIGN,
                            "foreign entry %llu is dlsym(%.*s, %.*s): this loader does not allow "
                            "dlsym entries (loading it would open that library)",
                            (unsigned long long)k + 1, la, lib, lb, (const char *)f->b);
        }
        return img_fail(err, MP_IMG_ERR_FOREIGN,
                        "foreign entry %llu is of kind %s, which this loader does not allow",
                        (unsigned long long)k + 1, kind_name[f->kind]);
    }
    return MP_IMG_OK;
}

static mp_img_status resolve_all(mp_img_heap *h, const struct img_view *v, uintptr_t *fvals,
                                 mp_img_error *err)
{
    mp_img_status st = refuse_foreign(h->reg, v, err);
    fvals[0] = 0;
    if (st != MP_IMG_OK)
        return st;
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind != IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], NULL, err);
    if (st != MP_IMG_OK || v->n_code == 0)
        return st;
    struct img_modules mods = {0};
    if (img_modules_load(&mods))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory listing modules");
    if (!(h->codes = calloc(v->n_code, sizeof *h->codes))) {
        img_modules_free(&mods);
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory naming code locations");
    }
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind == IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], &mods, err);
    img_modules_free(&mods);
    return st;
}

/* Allocate: one block for the region's copy with the byte blob after it,
 * owned by the heap as one chunk whose objects end where the blob begins.
 * The chunk's start bits and the pass's target bits go in the same block,
 * after the blob: fresh memory is zero, and a block of huge pages has its
 * last one zeroed in full anyway. */
static mp_img_status allocate(mp_img_heap *h, const struct img_view *v, struct pass *ps,
                              struct img_chunk **chunk, mp_img_error *err)
{
    *chunk = NULL;
    if (v->words == 0)
        return MP_IMG_OK; /* no objects: roots are all nil, no bytes unit */
    const size_t cap = (size_t)v->words * sizeof(mp_img_word);
    const size_t bits_at = cap + (size_t)img_pad8(v->hd.n_bytes);
    const size_t bits = ((size_t)(v->words + 63) / 64 + 1) * sizeof(uint64_t);
    const size_t size = img_big_size(bits_at + 2 * bits);
    int mapped;
    unsigned char *base = img_big_alloc_lazy(size, &mapped);
    if (!base)
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    if (!mapped) /* from malloc: not zero */
        memset(base + bits_at, 0, 2 * bits);
    *chunk = img_heap_add_chunk(h, base, cap, size, mapped, NULL);
    if (!*chunk)
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    (*chunk)->starts = (uint64_t *)(void *)(base + bits_at);
    (*chunk)->starts_in_base = 1;
    ps->base = (mp_img_word *)(void *)base;
    ps->starts = (*chunk)->starts;
    ps->targets = (uint64_t *)(void *)(base + bits_at + bits);
    ps->targets_in_heap = 1;
    ps->blob = v->hd.n_bytes ? base + cap : NULL;
    return MP_IMG_OK;
}

static mp_img_status install_roots(mp_img_heap *h, const struct img_view *v,
                                   const mp_img_word *base, mp_img_error *err)
{
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        char name[IMG_NAME_MAX + 1];
        memcpy(name, v->roots[r].name, v->roots[r].name_len);
        name[v->roots[r].name_len] = '\0';
        uint64_t x = v->roots[r].index;
        mp_img_status st = mp_img_root_set(h, name, x ? (void *)(base + x) : NULL, err);
        if (st != MP_IMG_OK)
            return st;
    }
    return MP_IMG_OK;
}

static mp_img_status load_view(mp_img_registry *reg, struct img_view *v, mp_img_heap **out,
                               mp_img_error *err)
{
    mp_img_heap *h = NULL;
    mp_img_status st = mp_img_heap_new(reg, &h, err);
    if (st != MP_IMG_OK)
        return st;
    struct pass ps;
    memset(&ps, 0, sizeof ps);
    uint64_t none = 0, no_targets = 0; /* the bits of an empty region */
    struct img_chunk *chunk = NULL;
    uintptr_t *fvals = malloc((v->hd.n_foreign + 1) * sizeof *fvals);
    if (!fvals)
        st = img_fail(err, MP_IMG_ERR_NOMEM, "out of memory loading %llu objects",
                      (unsigned long long)v->hd.n_objects);
    if (st == MP_IMG_OK)
        st = pass_begin(&ps, v, 0, err);
    if (st == MP_IMG_OK)
        st = resolve_all(h, v, fvals, err);
    if (st == MP_IMG_OK)
        st = allocate(h, v, &ps, &chunk, err);
    if (st == MP_IMG_OK && !chunk) { /* no objects: the pass still checks the rest */
        ps.starts = &none;
        ps.targets = &no_targets;
        ps.targets_in_heap = 1;
    }
    if (st == MP_IMG_OK) {
        ps.fvals = fvals;
        if (v->hd.meta_width == 0 && v->hd.shapes_size == 0) {
            /* The fast fill, and the careful pass to say what is wrong. */
            if (fast_fill(&ps) != 0) {
                st = img_view_check_objects(v, err);
                if (st == MP_IMG_OK)
                    st = img_fail(err, MP_IMG_ERR_CORRUPT, "the object region is not sound");
            }
        } else {
            st = region_pass(&ps, err, 1, 0);
        }
    }
    if (st == MP_IMG_OK && chunk) {
        chunk->used = chunk->cap;
        chunk->objects = (size_t)v->hd.n_objects;
        h->count += (size_t)v->hd.n_objects;
    }
    if (st == MP_IMG_OK)
        st = install_roots(h, v, chunk ? (const mp_img_word *)chunk->base : NULL, err);
    pass_end(&ps);
    free(fvals);
    if (st != MP_IMG_OK) {
        mp_img_heap_free(h);
        return st;
    }
    *out = h;
    return img_ok(err);
}

mp_img_status mp_img_load_memory(mp_img_registry *reg, const void *data, size_t len,
                                 mp_img_heap **out, mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || (!data && len))
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "registry and data must be given");
    struct img_view v;
    mp_img_status st = img_view_open(&v, data ? data : "", len, reg, err);
    if (st == MP_IMG_OK)
        st = load_view(reg, &v, out, err);
    img_view_close(&v);
    return st;
}

/* An image file in memory: mapped read-only (no copy), or read into a
 * buffer when it cannot be mapped. Not MAP_POPULATE: populating walks the
 * file page by page (1.3 ms for 36 MB here), where the faults of the pass,
 * which reads the file front to back, map the page cache's folios a batch
 * at a time (0.3 ms; BENCHMARKS.md). A file
 * truncated by another process while mapped raises SIGBUS, as any mapped
 * file does; mp_img_write() replaces images by rename, never in place. */
struct img_file {
    const unsigned char *data;
    size_t len;
    void *map;
    unsigned char *buf;
};

static void file_close(struct img_file *f)
{
    if (f->map)
        munmap(f->map, f->len);
    free(f->buf);
}

static mp_img_status file_open(const char *path, struct img_file *f, mp_img_error *err)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return img_fail(err, MP_IMG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = S_ISREG(sb.st_mode) ? errno : EINVAL;
        close(fd);
        return img_fail(err, MP_IMG_ERR_IO, "cannot read '%s': %s", path,
                        e == EINVAL ? "not a regular file" : strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    if (size > 0) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            f->map = m;
            f->data = m;
            f->len = size;
            return MP_IMG_OK;
        }
    }
    unsigned char *b = malloc(size ? size : 1);
    if (!b) {
        close(fd);
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, b + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(b);
            close(fd);
            return img_fail(err, MP_IMG_ERR_IO, "reading '%s': %s", path, strerror(e));
        }
        if (n == 0)
            break; /* shrank under us: the view will say what is missing */
        got += (size_t)n;
    }
    close(fd);
    f->buf = b;
    f->data = b;
    f->len = got;
    return MP_IMG_OK;
}

mp_img_status mp_img_load(mp_img_registry *reg, const char *path, mp_img_heap **out,
                          mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || !path)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "registry and path must be given");
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    st = mp_img_load_memory(reg, f.data, f.len, out, err);
    file_close(&f);
    return st;
}

mp_img_status mp_img_verify(const char *path, mp_img_error *err)
{
    if (!path)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "path must be given");
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    struct img_view v;
    st = img_view_open(&v, f.data, f.len, NULL, err);
    if (st == MP_IMG_OK)
        st = img_view_check_objects(&v, err);
    img_view_close(&v);
    file_close(&f);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
