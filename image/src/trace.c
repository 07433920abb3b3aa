/* SPDX-License-Identifier: MIT */
/* The trace: "a mark phase that emits". Breadth first from the roots in
 * name order, so an object's index depends on the graph alone, never on
 * allocation order or addresses; with `emit`, each object's record is
 * written as the object is processed, references as indices (the writer
 * then lays the records out as the region, writer.c). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Set bits of x (SWAR: no libgcc call where the CPU baseline lacks popcnt). */
static inline unsigned popcount64(uint64_t x)
{
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
}

/* The k-th object of chunk c holds its unit 0 at word w: k is the number
 * of start bits below w. */
static inline size_t ordinal(const struct img_chunk *c, const uint32_t *rank, size_t w)
{
    uint64_t below = c->starts[w / 64] & (((uint64_t)1 << (w % 64)) - 1);
    return rank[w / 64] + popcount64(below);
}

/* Decides object `index`'s shape and extent for this write. */
static mp_img_status shape_of(const mp_img_type *t, const mp_img_word *obj, size_t index,
                              mp_img_shape *custom, const mp_img_shape **shape, uint32_t *extent,
                              mp_img_error *err)
{
    uint32_t units = img_hdr(obj)->units;
    switch (t->shape_class) {
    case IMG_SHAPE_FIXED:
        *shape = &t->shape;
        *extent = units; /* mp_img_alloc() keeps units == count */
        return MP_IMG_OK;
    case IMG_SHAPE_DYNAMIC:
        if (obj[0] > (mp_img_word)units - 1)
            return img_fail(err, MP_IMG_E_SHAPE,
                            "object %zu (type '%s'): its slot-0 count %lu exceeds the %u units "
                            "allocated after it",
                            index, t->name, (unsigned long)obj[0], units - 1);
        *shape = &t->shape;
        *extent = (uint32_t)obj[0] + 1;
        return MP_IMG_OK;
    case IMG_SHAPE_CUSTOM:
        memset(custom, 0, sizeof *custom);
        if (!t->opts.shape_of(t->opts.ctx, obj, units, custom))
            return img_fail(err, MP_IMG_E_SHAPE,
                            "object %zu (type '%s'): its shape callback refused the instance",
                            index, t->name);
        if (custom->dynamic || custom->count > units || img_shape_check(custom, NULL) != MP_IMG_OK)
            return img_fail(err, MP_IMG_E_SHAPE,
                            "object %zu (type '%s'): its shape callback returned a shape that "
                            "does not fit its %u units",
                            index, t->name, units);
        img_shape_canon(custom);
        *shape = custom;
        *extent = custom->count;
        return MP_IMG_OK;
    default:
        return img_fail(err, MP_IMG_E_NO_SHAPE,
                        "object %zu (type '%s'): the type has no shape; declare one, or a shape "
                        "callback if its instances differ",
                        index, t->name);
    }
}

/* A reference held by object `holder` (type t) at `unit`, or by root
 * number `unit` when holder == 0: checked, reached if new, and resolved to
 * its index in *index. */
static mp_img_status visit(mp_img_heap *h, struct img_trace *tr, void *p, size_t holder,
                           const mp_img_type *t, size_t unit, uint64_t *index, mp_img_error *err)
{
    size_t chunk, word;
    if (!p) {
        *index = 0;
        return MP_IMG_OK;
    }
    /* Checked before anything reads *p: p may be any address at all. */
    if (!img_heap_locate(h, p, &chunk, &word)) {
        if (holder == 0)
            return img_fail(err, MP_IMG_E_NOT_ON_HEAP,
                            "root '%s': 0x%lx is not an object on this heap", h->roots[unit].name,
                            (unsigned long)(uintptr_t)p);
        return img_fail(err, MP_IMG_E_NOT_ON_HEAP,
                        "object %zu (type '%s') unit %zu: reference 0x%lx is not an object on "
                        "this heap",
                        holder, t->name, unit, (unsigned long)(uintptr_t)p);
    }
    /* Callbacks must not allocate on the heap being written; if one did,
     * the object is newer than the stamp tables: refused, not followed. */
    size_t k = chunk < tr->n_chunks && word < tr->words[chunk]
                   ? ordinal(&h->chunks[chunk], tr->rank + tr->rank_at[chunk], word)
                   : SIZE_MAX;
    struct img_obj *hdr = img_hdr(p);
    if (k == SIZE_MAX || (!(hdr->flags & IMG_TRACED) && tr->n >= tr->cap))
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "object %zu unit %zu: references an object allocated during the write",
                        holder, unit);
    uint32_t *stamp = &tr->stamps[tr->first[chunk] + k];
    if (!(hdr->flags & IMG_TRACED)) {
        /* Reached: its shape is decided now (the region's layout needs
         * every object's size before any record is placed). */
        const mp_img_type *pt = h->reg->types[hdr->type];
        mp_img_shape custom;
        const mp_img_shape *s = NULL;
        uint32_t units = 0;
        mp_img_status st = shape_of(pt, p, tr->n + 1, &custom, &s, &units, err);
        if (st != MP_IMG_OK)
            return st;
        uint64_t at = tr->region + h->meta_width + 1;
        uint64_t end = at + units;
        if (end > IMG_MAX_REGION_WORDS)
            return img_fail(err, MP_IMG_E_LIMIT,
                            "object %zu: the reachable objects need more than %llu words",
                            tr->n + 1, (unsigned long long)IMG_MAX_REGION_WORDS);
        if (pt->shape_class == IMG_SHAPE_CUSTOM) {
            if (img_grow((void **)&tr->shapes, &tr->cap_shapes, 2 * (tr->n_shapes + 1),
                         sizeof *tr->shapes))
                return img_fail(err, MP_IMG_E_NOMEM, "out of memory at object %zu", tr->n + 1);
            tr->shapes[2 * tr->n_shapes] = custom.described;
            tr->shapes[2 * tr->n_shapes + 1] = custom.mask;
            tr->n_shapes++;
        }
        /* Invariant: IMG_TRACED set <=> the object is in order[], its stamp
         * is its 1-based position there and units[] holds its unit count.
         * The chain walk in img_trace_clear() takes the bit back from every
         * object. */
        hdr->flags |= IMG_TRACED;
        *stamp = (uint32_t)(tr->n + 1);
        tr->units[tr->n] = units;
        tr->region = end;
        tr->order[tr->n++] = p; /* order[] was sized for every object of the heap */
    }
    *index = *stamp;
    return MP_IMG_OK;
}

static mp_img_status emit_bytes(struct img_trace *tr, const mp_img_type *t, const mp_img_word *obj,
                                size_t index, size_t unit, uint64_t *value, mp_img_error *err)
{
    if (!obj[unit]) {
        *value = 0;
        return MP_IMG_OK;
    }
    if (!t->opts.bytes_length)
        return img_fail(err, MP_IMG_E_SHAPE,
                        "object %zu (type '%s') unit %zu: a bytes unit, but the type has no "
                        "bytes_length function",
                        index, t->name, unit);
    size_t len = t->opts.bytes_length(t->opts.ctx, obj, unit);
    if (len == SIZE_MAX)
        return img_fail(err, MP_IMG_E_SHAPE,
                        "object %zu (type '%s') unit %zu: the type's bytes_length refused it",
                        index, t->name, unit);
    if ((uint64_t)len > (UINT64_C(1) << 40) || tr->blob_size > (UINT64_C(1) << 48))
        return img_fail(err, MP_IMG_E_LIMIT,
                        "object %zu (type '%s') unit %zu: %zu bytes is beyond the format's limits",
                        index, t->name, unit, len);
    if (img_grow((void **)&tr->bytes, &tr->cap_bytes, tr->n_bytes + 1, sizeof *tr->bytes))
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory at object %zu", index);
    tr->bytes[tr->n_bytes++] = (struct img_bytes_ref){(const void *)obj[unit], len};
    *value = tr->blob_size + 8; /* the data, after its length word */
    tr->blob_size += img_blob_entry(len);
    return MP_IMG_OK;
}

static mp_img_status emit_foreign(struct img_trace *tr, const mp_img_type *t, mp_img_word v,
                                  size_t pos, size_t index, size_t unit, mp_img_error *err)
{
    if (v == 0 || t->opts.foreign == MP_IMG_FOREIGN_DROP)
        return MP_IMG_OK; /* nil: stays 0 */
    if (img_grow((void **)&tr->frefs, &tr->cap_frefs, tr->n_frefs + 1, sizeof *tr->frefs))
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory at object %zu", index);
    tr->frefs[tr->n_frefs++] = (struct img_foreign_ref){pos, t, v, index, unit};
    return MP_IMG_OK;
}

/* Processes object i: its references traced and, with emit, its record
 * (metadata, header word, units, references as indices) written. */
static mp_img_status process(mp_img_heap *h, struct img_trace *tr, size_t i, mp_img_error *err)
{
    mp_img_word *obj = tr->order[i];
    struct img_obj *hdr = img_hdr(obj);
    const mp_img_type *t = h->reg->types[hdr->type];
    const uint32_t extent = tr->units[i];
    mp_img_shape custom;
    const mp_img_shape *s = &t->shape;
    if (t->shape_class == IMG_SHAPE_CUSTOM) {
        size_t k = tr->shapes_done++;
        custom = (mp_img_shape){false, extent, (uint32_t)tr->shapes[2 * k], tr->shapes[2 * k + 1]};
        s = &custom;
    }
    mp_img_status st = MP_IMG_OK;
    uint64_t *rec = NULL;
    if (tr->emit) {
        rec = tr->rec + tr->rec_len;
        const mp_img_word *meta = obj - 1 - h->meta_width;
        for (size_t m = 0; m < h->meta_width; m++)
            *rec++ = meta[m];
        struct img_obj written = {extent, hdr->type, (uint16_t)(hdr->flags & MP_IMG_USER_FLAGS)};
        memcpy(rec++, &written, sizeof written);
        tr->rec_len = (size_t)(rec - tr->rec) + extent;
    }
    uint64_t x = 0;
    for (size_t u = 0; u < extent; u++) {
        switch (img_kind(s, u)) {
        case MP_IMG_REF:
            st = visit(h, tr, (void *)obj[u], i + 1, t, u, &x, err);
            break;
        case MP_IMG_WORD:
            x = obj[u];
            break;
        case MP_IMG_BYTES:
            st = tr->emit ? emit_bytes(tr, t, obj, i + 1, u, &x, err) : MP_IMG_OK;
            break;
        case MP_IMG_FOREIGN:
            x = 0; /* a placeholder until the value is named */
            st = tr->emit ? emit_foreign(tr, t, obj[u], (size_t)(rec + u - tr->rec), i + 1, u, err)
                          : MP_IMG_OK;
            break;
        }
        if (st != MP_IMG_OK)
            return st;
        if (rec)
            rec[u] = x;
    }
    return MP_IMG_OK;
}

static void *big(struct img_block *b, size_t size, int zero)
{
    b->size = size ? size : 1;
    b->p = zero ? img_big_zalloc(b->size, &b->mapped) : img_big_alloc(b->size, &b->mapped);
    return b->p;
}

static void big_free(struct img_block *b)
{
    if (b->p)
        img_big_free(b->p, b->size, b->mapped);
    b->p = NULL;
}

/* The stamp table and the rank directory of every chunk. */
static int reserve_stamps(mp_img_heap *h, struct img_trace *tr)
{
    size_t n = h->n_chunks ? h->n_chunks : 1, groups = 0;
    tr->n_chunks = h->n_chunks;
    tr->first = malloc(n * sizeof *tr->first);
    tr->rank_at = malloc(n * sizeof *tr->rank_at);
    tr->words = malloc(n * sizeof *tr->words);
    if (!tr->first || !tr->rank_at || !tr->words)
        return -1;
    size_t objects = 0;
    for (size_t c = 0; c < h->n_chunks; c++) {
        tr->first[c] = objects;
        tr->rank_at[c] = groups;
        tr->words[c] = h->chunks[c].used / sizeof(mp_img_word);
        objects += h->chunks[c].objects;
        groups += (tr->words[c] + 63) / 64;
    }
    tr->rank = malloc((groups ? groups : 1) * sizeof *tr->rank);
    if (!tr->rank || !big(&tr->stamps_block, objects * sizeof *tr->stamps, 1))
        return -1;
    tr->stamps = tr->stamps_block.p;
    for (size_t c = 0; c < h->n_chunks; c++) {
        uint32_t before = 0;
        for (size_t g = 0; g < (tr->words[c] + 63) / 64; g++) {
            tr->rank[tr->rank_at[c] + g] = before;
            before += popcount64(h->chunks[c].starts[g]);
        }
    }
    return 0;
}

/* Room for the whole heap, so that nothing moves during the walk: order
 * and unit counts for every object, the region for every heap word (an
 * object's record is never longer than its place on the heap). */
static mp_img_status reserve(mp_img_heap *h, struct img_trace *tr, mp_img_error *err)
{
    size_t words = 0;
    for (size_t c = 0; c < h->n_chunks; c++)
        words += h->chunks[c].used / sizeof(mp_img_word);
    tr->cap = h->count;
    tr->order = big(&tr->order_block, tr->cap * sizeof *tr->order, 0);
    tr->root_index = calloc(h->n_roots ? h->n_roots : 1, sizeof *tr->root_index);
    tr->units = big(&tr->units_block, tr->cap * sizeof *tr->units, 0);
    if (tr->emit)
        tr->rec = big(&tr->rec_block, words * sizeof *tr->rec, 0);
    if (!tr->order || !tr->root_index || !tr->units || (tr->emit && !tr->rec) ||
        reserve_stamps(h, tr))
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory tracing %zu objects", h->count);
    if (h->count >= (size_t)UINT32_MAX - 1)
        return img_fail(err, MP_IMG_E_LIMIT, "more than %u objects on the heap",
                        (unsigned)(UINT32_MAX - 2));
    return MP_IMG_OK;
}

mp_img_status img_trace_run(mp_img_heap *h, struct img_trace *tr, mp_img_error *err)
{
    mp_img_status st = reserve(h, tr, err);
    for (size_t r = 0; r < h->n_roots && st == MP_IMG_OK; r++)
        st = visit(h, tr, h->roots[r].obj, 0, NULL, r, &tr->root_index[r], err);
    /* order[] is its own queue: objects are appended as they are reached
     * and processed in index order. */
    for (size_t i = 0; i < tr->n && st == MP_IMG_OK; i++)
        st = process(h, tr, i, err);
    return st;
}

static void untrace(void *obj, void *ctx)
{
    (void)ctx;
    img_hdr(obj)->flags &= ~IMG_TRACED;
}

void img_trace_clear(mp_img_heap *h, struct img_trace *tr)
{
    /* A chain walk, not a tree walk: it reaches every object, including one
     * a trace flagged and the graph has since dropped. */
    img_chain_walk(h, untrace, NULL);
    big_free(&tr->stamps_block);
    big_free(&tr->order_block);
    big_free(&tr->units_block);
    free(tr->shapes);
    big_free(&tr->rec_block);
    free(tr->rank);
    free(tr->first);
    free(tr->rank_at);
    free(tr->words);
    free(tr->root_index);
    free(tr->bytes);
    free(tr->frefs);
    memset(tr, 0, sizeof *tr);
}

mp_img_status mp_img_heap_reachable(mp_img_heap *h, size_t *count, mp_img_error *err)
{
    if (!h)
        return img_fail(err, MP_IMG_E_ARGUMENT, "heap must not be NULL");
    struct img_trace tr;
    memset(&tr, 0, sizeof tr);
    mp_img_status st = img_trace_run(h, &tr, err);
    if (count)
        *count = st == MP_IMG_OK ? tr.n : 0;
    img_trace_clear(h, &tr);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
