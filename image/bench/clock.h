/* SPDX-License-Identifier: MIT */
/* Clocks and medians shared by the image benchmark programs: CPU time of
 * the process (what the work costs, whatever else the machine runs) and
 * monotonic wall time (reported beside it), and the comparison qsort()
 * needs for a median. */
#ifndef MIMPROF_IMAGE_BENCH_CLOCK_H
#define MIMPROF_IMAGE_BENCH_CLOCK_H

#include <time.h>

static inline double bench_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double now(void) { return bench_seconds(CLOCK_MONOTONIC); }
static inline double cpu(void) { return bench_seconds(CLOCK_PROCESS_CPUTIME_ID); }

/* qsort() order of doubles, ascending. */
static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
