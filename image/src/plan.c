/* SPDX-License-Identifier: MIT */
/* The load pass's plan of each type: the header word a sound instance has
 * and its units split into a head of any kinds and a tail of one kind,
 * with the fast fill's own case for the commonest shapes. */
#include "pass.h"

#include <stdlib.h>

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

struct plan *img_plans_make(const struct img_view *v, uint32_t *tmask)
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
