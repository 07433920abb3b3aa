/* SPDX-License-Identifier: MIT */
/* A report's memory reconciliation (reconcile.c). Not installed. */
#ifndef MIMPROF_PROFILING_RECONCILE_H
#define MIMPROF_PROFILING_RECONCILE_H

#include "report_builder.h"
#include "session.h"

/* The figures of one reconciliation, bytes; MP_PROF_STAT_NONE where not
 * known. */
typedef struct mp_reconcile {
    uint64_t rss;
    mp_prof_allocator_stats alloc;
    bool have_alloc;
    uint64_t live_heap; /* estimated: the report's inuse_space, rounded */
    uint64_t profiler;  /* the profiler's own tables */
} mp_reconcile;

/* Gathers the figures for a report of session p whose in-use bytes sum
 * to live_bytes. Caller holds g_rec.session, under the guard. */
void mp_reconcile_gather(const mp_profiler *p, double live_bytes, mp_reconcile *out);

/* Adds the reconciliation's comments (the lines "memory ...") to b. */
mp_prof_status mp_reconcile_comment(mp_report_builder *b, const mp_reconcile *r,
                                    const char *allocator);

#endif
