/* SPDX-License-Identifier: MIT */
/* Per-stack sums for one report. Keys are depot pointers (equal stacks are
 * one depot entry) and age buckets. Values are the estimator's unrounded sums: rounding
 * happens once, in the encoder. */
#include <stdlib.h>

#include "aggregate.h"
#include "hash.h"

/* The entry of (s, bucket), made on first sight; NULL on out-of-memory. */
static mp_agg_entry *entry_of(mp_agg *a, const mp_stack *s, unsigned bucket)
{
    if (!mp_index_reserve(&a->ix))
        return NULL;
    mp_index_probe p = mp_index_start(&a->ix, mp_hash_ptr((uintptr_t)s ^ bucket));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (a->e[i].stack == s && a->e[i].bucket == bucket)
            return &a->e[i];
    if (!mp_array_reserve((void **)&a->e, &a->e_cap, a->count + 1, sizeof *a->e))
        return NULL;
    mp_agg_entry *e = &a->e[a->count];
    *e = (mp_agg_entry){.stack = s, .bucket = bucket};
    mp_index_put(&a->ix, &p, (uint32_t)a->count++);
    return e;
}

bool mp_agg_add(mp_agg *a, const mp_stack *s, bool live, unsigned bucket, double objects,
                double bytes)
{
    if (!live)
        bucket = MP_AGE_NONE;
    mp_agg_entry *e = entry_of(a, s, bucket);
    if (e == NULL) {
        a->oom = true;
        return false;
    }
    if (live) {
        e->v[MP_VAL_INUSE_OBJECTS] += objects;
        e->v[MP_VAL_INUSE_SPACE] += bytes;
        e->n_live++;
    } else {
        e->v[MP_VAL_ALLOC_OBJECTS] += objects;
        e->v[MP_VAL_ALLOC_SPACE] += bytes;
        e->n_interval++;
    }
    return true;
}

void mp_agg_free(mp_agg *a)
{
    free(a->e);
    mp_index_free(&a->ix);
    *a = (mp_agg){0};
}
