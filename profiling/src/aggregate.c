/* SPDX-License-Identifier: MIT */
/* Per-stack sums for one report. Keys are depot pointers (equal stacks are
 * one depot entry) and age buckets. Values are the estimator's unrounded sums: rounding
 * happens once, in the encoder. */
#include <stdlib.h>

#include "aggregate.h"

static size_t slot_of(const mp_stack *s, unsigned bucket, size_t cap)
{
    uint64_t x = ((uint64_t)(uintptr_t)s ^ bucket) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x >> 20) & (cap - 1);
}

static bool grow(mp_agg *a)
{
    size_t ncap = a->cap ? a->cap * 2 : 256;
    mp_agg_entry *n = calloc(ncap, sizeof *n);
    if (n == NULL)
        return false;
    for (size_t i = 0; i < a->cap; i++) {
        if (a->e[i].stack == NULL)
            continue;
        size_t k = slot_of(a->e[i].stack, a->e[i].bucket, ncap);
        while (n[k].stack != NULL)
            k = (k + 1) & (ncap - 1);
        n[k] = a->e[i];
    }
    free(a->e);
    a->e = n;
    a->cap = ncap;
    return true;
}

bool mp_agg_add(mp_agg *a, const mp_stack *s, bool live, unsigned bucket, double objects,
                double bytes)
{
    if (!live)
        bucket = MP_AGE_NONE;
    if ((a->count + 1) * 2 > a->cap && !grow(a)) {
        a->oom = true;
        return false;
    }
    size_t k = slot_of(s, bucket, a->cap);
    while (a->e[k].stack != NULL && (a->e[k].stack != s || a->e[k].bucket != bucket))
        k = (k + 1) & (a->cap - 1);
    mp_agg_entry *e = &a->e[k];
    if (e->stack == NULL) {
        e->stack = s;
        e->bucket = bucket;
        a->count++;
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
    *a = (mp_agg){0};
}
