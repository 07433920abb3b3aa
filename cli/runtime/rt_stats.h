/* SPDX-License-Identifier: MIT */
/* The preload's allocator statistics hook (rt_stats.c). */
#ifndef MIMPROF_RT_STATS_H
#define MIMPROF_RT_STATS_H

#include <mimprof/profiling.h>

/* Gives session p the statistics of the preload's provider, so that its
 * reports reconcile RSS with the allocator's own figures. */
void mpt_rt_stats_attach(mp_profiler *p);

#endif
