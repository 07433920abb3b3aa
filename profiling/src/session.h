/* SPDX-License-Identifier: MIT */
/* Internal: the session handle, for the modules that work on a running
 * session besides session.c (heap_image.c). Not installed. */
#ifndef MIMPROF_PROFILING_SESSION_H
#define MIMPROF_PROFILING_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#include "aggregate.h"
#include "report_builder.h"

struct mp_profiler {
    uint64_t gen;
    bool stopped;
    mp_prof_config cfg;
    mp_report_cache *cache;       /* under g_rec.session; created by the first report or image */
    uint64_t interval_start_wall; /* start of the interval the next report covers */
    /* The peak of the window the last report closed (peak.c), per stack,
     * encoded on demand by mp_profiler_report_peak (peak_report.c); under
     * g_rec.session. */
    mp_agg peak;
    mp_prof_peak_info peak_info;
    /* Comments of the next report (mp_profiler_annotate), under g_rec.session. */
    char *notes[MP_PROF_MAX_NOTES];
    unsigned nnotes;
    /* The allocator statistics hook (mp_profiler_set_allocator_stats),
     * under g_rec.session. */
    mp_prof_allocator_stats_fn stats_fn;
    void *stats_ctx;
    char stats_name[32];
};

/* True when `p` owns the running session. Caller holds g_rec.session. */
bool mp_session_owns_locked(const mp_profiler *p);

#endif
