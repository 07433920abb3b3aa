/* SPDX-License-Identifier: MIT */
/* Per-stack aggregation of one report (see aggregate.c). */
#ifndef MIMPROF_PROFILING_AGGREGATE_H
#define MIMPROF_PROFILING_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "age.h"
#include "index.h"
#include "internal.h"
#include "report_builder.h"

/* Keyed by (stack, age bucket): a stack's allocations are one entry
 * (bucket MP_AGE_NONE), its live samples one entry per age bucket. */
typedef struct mp_agg_entry {
    const mp_stack *stack;
    unsigned bucket; /* age.h: MP_AGE_NONE for allocations */
    double v[MP_VAL_COUNT];
    uint64_t n_interval; /* allocation records summed into v[ALLOC_*] */
    uint64_t n_live;     /* live entries summed into v[INUSE_*] */
} mp_agg_entry;

/* e[0 .. count) are the entries in the order of their first sample, each
 * in ix. Zero-initialised: empty. */
typedef struct mp_agg {
    mp_agg_entry *e;
    size_t count, e_cap;
    mp_index ix;
    bool oom; /* a sample was lost to out-of-memory */
} mp_agg;

/* Adds one sample of `objects` objects and `bytes` bytes to the stack's
 * allocation (live = false; bucket is then ignored) or in-use (live =
 * true) sums of age bucket `bucket` (MP_AGE_NONE: age unknown). */
bool mp_agg_add(mp_agg *a, const mp_stack *s, bool live, unsigned bucket, double objects,
                double bytes);
void mp_agg_free(mp_agg *a);

#endif
