/* The trace: the mark half of "a mark phase that emits". Breadth first from
 * the roots in name order, so an object's index depends on the graph alone,
 * never on allocation order or addresses. */
#include "format.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int push(struct img_trace *tr, void *obj)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 1024;
        void **o = realloc(tr->order, cap * sizeof *o);
        if (!o)
            return -1;
        tr->order = o;
        uint32_t *e = realloc(tr->extents, cap * sizeof *e);
        if (!e)
            return -1;
        tr->extents = e;
        tr->cap = cap;
    }
    struct img_obj *hdr = img_hdr(obj);
    /* Invariant: IMG_TRACED set <=> the object is in order[] and its stamp
     * is its 1-based position there. The chain walk in img_trace_clear()
     * takes the bit back from every object, reached or not. */
    hdr->flags |= IMG_TRACED;
    hdr->stamp = (uint32_t)(tr->n + 1);
    tr->order[tr->n++] = obj;
    return 0;
}

/* Visits a candidate reference held by `holder` (index, type, unit) or by a
 * root (holder == 0, unit = root position). */
static mp_img_status visit(mp_img_heap *h, struct img_trace *tr, void *p, size_t holder,
                           const mp_img_type *t, size_t unit, mp_img_error *err)
{
    if (!p)
        return MP_IMG_OK;
    /* Checked before anything reads *p: p may be any address at all. */
    if (!mp_img_heap_contains(h, p)) {
        if (holder == 0)
            return img_fail(err, MP_IMG_ERR_NOT_ON_HEAP,
                            "root '%s': 0x%lx is not an object on this heap", h->roots[unit].name,
                            (unsigned long)(uintptr_t)p);
        return img_fail(err, MP_IMG_ERR_NOT_ON_HEAP,
                        "object %zu (type '%s') unit %zu: reference 0x%lx is not an object on "
                        "this heap",
                        holder, t->name, unit, (unsigned long)(uintptr_t)p);
    }
    if (img_hdr(p)->flags & IMG_TRACED)
        return MP_IMG_OK;
    if (tr->n >= (size_t)UINT32_MAX - 1)
        return img_fail(err, MP_IMG_ERR_LIMIT, "more than %u reachable objects",
                        (unsigned)(UINT32_MAX - 2));
    if (push(tr, p))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory tracing object %zu", tr->n + 1);
    return MP_IMG_OK;
}

/* Decides object `index`'s shape and extent for this write. */
static mp_img_status shape_of(struct img_trace *tr, const mp_img_type *t, mp_img_word *obj,
                              size_t index, const mp_img_shape **shape, uint32_t *extent,
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
            return img_fail(err, MP_IMG_ERR_SHAPE,
                            "object %zu (type '%s'): its slot-0 count %lu exceeds the %u units "
                            "allocated after it",
                            index, t->name, (unsigned long)obj[0], units - 1);
        *shape = &t->shape;
        *extent = (uint32_t)obj[0] + 1;
        return MP_IMG_OK;
    case IMG_SHAPE_CUSTOM: {
        mp_img_shape s = {0};
        if (!t->opts.shape_of(t->opts.ctx, obj, units, &s))
            return img_fail(err, MP_IMG_ERR_SHAPE,
                            "object %zu (type '%s'): its shape callback refused the instance",
                            index, t->name);
        if (s.dynamic || s.count > units || img_shape_check(&s, NULL) != MP_IMG_OK)
            return img_fail(err, MP_IMG_ERR_SHAPE,
                            "object %zu (type '%s'): its shape callback returned a shape that "
                            "does not fit its %u units",
                            index, t->name, units);
        img_shape_canon(&s);
        if (tr->n_custom == tr->cap_custom) {
            size_t cap = tr->cap_custom ? tr->cap_custom * 2 : 64;
            struct img_custom *c = realloc(tr->custom, cap * sizeof *c);
            if (!c)
                return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory tracing object %zu", index);
            tr->custom = c;
            tr->cap_custom = cap;
        }
        tr->custom[tr->n_custom] = (struct img_custom){index, s};
        *shape = &tr->custom[tr->n_custom++].shape;
        *extent = s.count;
        return MP_IMG_OK;
    }
    default:
        return img_fail(err, MP_IMG_ERR_NO_SHAPE,
                        "object %zu (type '%s'): the type has no shape; declare one, or a shape "
                        "callback if its instances differ",
                        index, t->name);
    }
}

mp_img_status img_trace_run(mp_img_heap *h, struct img_trace *tr, mp_img_error *err)
{
    memset(tr, 0, sizeof *tr);
    mp_img_status st;
    for (size_t r = 0; r < h->n_roots; r++)
        if ((st = visit(h, tr, h->roots[r].obj, 0, NULL, r, err)) != MP_IMG_OK)
            return st;
    /* order[] is its own queue: objects are appended as they are reached
     * and processed in index order. */
    for (size_t i = 0; i < tr->n; i++) {
        mp_img_word *obj = tr->order[i];
        const mp_img_type *t = h->reg->types[img_hdr(obj)->type];
        const mp_img_shape *s = NULL;
        uint32_t extent = 0;
        if ((st = shape_of(tr, t, obj, i + 1, &s, &extent, err)) != MP_IMG_OK)
            return st;
        tr->extents[i] = extent;
        if (s->mask == 0) {
            for (size_t u = 0; u < extent; u++)
                if ((st = visit(h, tr, (void *)obj[u], i + 1, t, u, err)) != MP_IMG_OK)
                    return st;
        } else {
            for (size_t u = 0; u < extent; u++)
                if (img_kind(s, u) == MP_IMG_REF &&
                    (st = visit(h, tr, (void *)obj[u], i + 1, t, u, err)) != MP_IMG_OK)
                    return st;
        }
    }
    return MP_IMG_OK;
}

const mp_img_shape *img_trace_shape(const struct img_trace *tr, const mp_img_type *t,
                                    size_t index, size_t *cursor)
{
    if (t->shape_class != IMG_SHAPE_CUSTOM)
        return &t->shape;
    /* Custom shapes were recorded in index order; the cursor walks them in
     * the same order as the caller walks the objects. */
    while (*cursor < tr->n_custom && tr->custom[*cursor].index < index)
        (*cursor)++;
    return &tr->custom[*cursor].shape;
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
    free(tr->order);
    free(tr->extents);
    free(tr->custom);
    memset(tr, 0, sizeof *tr);
}

mp_img_status mp_img_heap_reachable(mp_img_heap *h, size_t *count, mp_img_error *err)
{
    if (!h)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "heap must not be NULL");
    struct img_trace tr;
    mp_img_status st = img_trace_run(h, &tr, err);
    if (count)
        *count = st == MP_IMG_OK ? tr.n : 0;
    img_trace_clear(h, &tr);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
