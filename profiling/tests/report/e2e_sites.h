/* SPDX-License-Identifier: MIT */
/* Allocation sites of the end-to-end test, compiled -O2 -g (e2e_sites.c). */
#ifndef MIMPROF_REPORT_E2E_SITES_H
#define MIMPROF_REPORT_E2E_SITES_H

#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

/* The sampling allocator's alloc(size, align), called directly. */
typedef void *(*e2e_alloc_fn)(size_t, size_t);
void e2e_sites_set_allocator(e2e_alloc_fn f);

extern volatile int e2e_alpha_line;
void *e2e_site_alpha(size_t n);
/* e2e_inlined_beta (always inlined) allocates; inlined into this. */
void *e2e_outer_gamma(size_t n);
/* An application function named like the profiler's hook. */
void *mp_prof_hook_sample_app(size_t n);
/* Allocates, then calls mp_profiler_report(). */
void *e2e_calls_report(mp_profiler *p, size_t n, uint8_t **buf, size_t *len);
/* Recurses `depth` times, then allocates. */
void *e2e_recurse(int depth, size_t n);

#endif
