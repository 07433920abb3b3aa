/* SPDX-License-Identifier: MIT */
/* The careful pass over the object region: every header word checked
 * against the type table, every unit range-checked by its kind before it
 * is used, with (fill) or without (verify) writing the heap, and every
 * refusal named by object and unit. The loader takes it for images the
 * fast fill (fill.c) does not, and to say what the fast fill found wrong.
 * A refusal stands only if the file is what its writer wrote: when the
 * checksum of the whole file does not match, damage is reported as damage. */
#include "pass.h"

#include <stdlib.h>

static mp_img_status bad_checksum(mp_img_error *err)
{
    return img_fail(err, MP_IMG_E_CHECKSUM, "header field 'checksum' does not match the contents");
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
                return img_fail(err, MP_IMG_E_CORRUPT,
                                "object %llu unit %u: reference to word %llu of the region, "
                                "which is not an object",
                                (unsigned long long)i, (unsigned)u, (unsigned long long)x);
        }
    }
    return img_fail(err, MP_IMG_E_CORRUPT, "a reference names no object");
}

/* One unit of kind k at value x: checked, then (fill) relocated into *d.
 * A bytes unit names data whose length is in the word before it and
 * which a NUL follows, all inside the blob. */
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

    img_pass_hash_to(ps, region_at);
    while (f < fw || run_left) {
        { /* hashed a window ahead of what is read */
            const size_t at = (size_t)((run_left ? rnext : src + 8 * f) - v->data);
            if (at + 64 > ps->hashed)
                img_pass_hash_to(ps, v->len - at > WINDOW ? at + WINDOW : v->len);
        }
        i++;
        if (nw - p < w + 1 || (!run_left && fw - f < w + 1)) {
            st = img_fail(err, MP_IMG_E_CORRUPT,
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
                    st = img_fail(err, MP_IMG_E_CORRUPT,
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
                st = img_fail(err, MP_IMG_E_CORRUPT,
                              "object %llu: a run of type '%.*s', which has %s",
                              (unsigned long long)i, (int)v->types[o.type].name_len,
                              v->types[o.type].name, w ? "metadata words" : "no fixed shape");
                goto fail;
            }
            packed = img_run_packed(&v->types[o.type]);
            if (run < 2 || units == 0 || run > (packed ? 2 * (fw - f) : fw - f) / units ||
                run > (nw - p) / (1 + units)) {
                st = img_fail(err, MP_IMG_E_CORRUPT,
                              "object %llu: a run of %llu objects of %u units does not fit the "
                              "region",
                              (unsigned long long)i, (unsigned long long)run, (unsigned)units);
                goto fail;
            }
            rnext = src + 8 * f;
            f += img_run_words(packed, run, units);
            if (packed && run * units % 2 && img_rd32(src + 8 * f - 4) != 0) {
                st = img_fail(err, MP_IMG_E_CORRUPT,
                              "object %llu: the padding after its run is not zero",
                              (unsigned long long)i);
                goto fail;
            }
            run_left = run - 1;
            run_h = h;
        }
        const int packed_obj = (runs || inrun) && packed;
        if (units > nw - at || (!runs && !inrun && units > fw - f)) {
            st = img_fail(err, MP_IMG_E_CORRUPT, "object %llu: its %u units overrun the region",
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
                    st = img_fail(err, MP_IMG_E_CORRUPT,
                                  "object %llu: slot-0 count %llu contradicts its %u units",
                                  (unsigned long long)i, (unsigned long long)img_rd64(us),
                                  (unsigned)units);
                    goto fail;
                }
            } else { /* PLAN_CUSTOM */
                if (shape >= n_shapes) {
                    st = img_fail(err, MP_IMG_E_CORRUPT,
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
                    st = img_fail(err, MP_IMG_E_CORRUPT, "object %llu: bad per-object shape",
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
            st = img_fail(err, MP_IMG_E_CORRUPT, "object %llu: type index %u out of range",
                          (unsigned long long)i, (unsigned)o.type);
        else if (o.flags & ~MP_IMG_USER_FLAGS)
            st = img_fail(err, MP_IMG_E_CORRUPT, "object %llu: flags 0x%x are not user flags",
                          (unsigned long long)i, (unsigned)o.flags);
        else
            goto contradicts;
        goto fail;
    contradicts:
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "object %llu: %u units contradict the shape of type '%.*s'",
                      (unsigned long long)i, (unsigned)o.units, (int)v->types[o.type].name_len,
                      v->types[o.type].name);
        goto fail;
    bad_ref:
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "object %llu unit %u: reference to word %llu of a %llu-word region",
                      (unsigned long long)i, (unsigned)u, (unsigned long long)x,
                      (unsigned long long)nw);
        goto fail;
    bad_bytes:
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "object %llu unit %u: bytes offset %llu is not a blob entry",
                      (unsigned long long)i, (unsigned)u, (unsigned long long)x);
        goto fail;
    bad_foreign:
        st = img_fail(err, MP_IMG_E_CORRUPT, "object %llu unit %u: foreign index %llu out of range",
                      (unsigned long long)i, (unsigned)u, (unsigned long long)x);
        goto fail;
    }
    if (i != v->hd.n_objects) {
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "the region holds %llu objects, the header declares %llu",
                      (unsigned long long)i, (unsigned long long)v->hd.n_objects);
        goto fail;
    }
    if (p != nw) {
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "header field 'region words' is %llu, the region's objects take %llu",
                      (unsigned long long)nw, (unsigned long long)p);
        goto fail;
    }
    if (shape != n_shapes) {
        st = img_fail(err, MP_IMG_E_CORRUPT,
                      "the shape table has %llu entries, the region's objects use %llu",
                      (unsigned long long)n_shapes, (unsigned long long)shape);
        goto fail;
    }
    img_pass_hash_to(ps, v->len);
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
            return img_fail(err, MP_IMG_E_CORRUPT,
                            "root table: entry %llu names word %llu, which is not an object",
                            (unsigned long long)r, (unsigned long long)x);
    }
    return MP_IMG_OK;
fail:
    img_pass_hash_to(ps, v->len);
    return img_hash_final(&ps->hash) != v->hd.checksum ? bad_checksum(err) : st;
}
#undef UNIT_CASES

/* Bits for every word of the region, zeroed. */
static uint64_t *region_bits(const struct img_view *v)
{
    return calloc((size_t)(v->words + 63) / 64 + 1, sizeof(uint64_t));
}

mp_img_status img_pass_begin(struct pass *ps, const struct img_view *v, int targets,
                             mp_img_error *err)
{
    memset(ps, 0, sizeof *ps);
    ps->v = v;
    ps->hashed = IMG_CHECKSUM_FROM;
    img_hash_init(&ps->hash);
    ps->plans = img_plans_make(v, &ps->tmask);
    if (targets)
        ps->targets = region_bits(v);
    if (!ps->plans || (targets && !ps->targets))
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory checking %llu objects",
                        (unsigned long long)v->hd.n_objects);
    return MP_IMG_OK;
}

void img_pass_end(struct pass *ps)
{
    free(ps->plans);
    if (!ps->targets_in_heap)
        free(ps->targets);
}

mp_img_status img_view_check_objects(const struct img_view *v, mp_img_error *err)
{
    struct pass ps;
    mp_img_status st = img_pass_begin(&ps, v, 1, err);
    uint64_t *starts = st == MP_IMG_OK ? region_bits(v) : NULL;
    if (st == MP_IMG_OK && !starts)
        st = img_fail(err, MP_IMG_E_NOMEM, "out of memory checking %llu objects",
                      (unsigned long long)v->hd.n_objects);
    if (st == MP_IMG_OK) {
        ps.starts = starts;
        st = v->hd.meta_width ? region_pass(&ps, err, 0, 0) : region_pass(&ps, err, 0, 1);
    }
    free(starts);
    img_pass_end(&ps);
    return st;
}

mp_img_status img_pass_fill(struct pass *ps, mp_img_error *err)
{
    return region_pass(ps, err, 1, 0);
}
