/* SPDX-License-Identifier: MIT */
/* Known call sites with known lines, compiled -O2 -g (sites.c): each calls
 * sites_capture(__LINE__) which records its return address and the line of
 * the call. */
#ifndef MIMPROF_REPORT_TEST_SITES_H
#define MIMPROF_REPORT_TEST_SITES_H

#include <stdint.h>

extern volatile uintptr_t sites_pc;
extern volatile int sites_line;
/* Lines of the calls into the inlined function (in its caller). */
extern volatile int sites_call_line;

void sites_capture(int line);

/* A plain function: sites_pc lies in it, at line sites_line. */
void report_site_alpha(void);
/* report_inlined_beta (always inlined) calls sites_capture; it is inlined
 * into report_outer_gamma at line sites_call_line. */
void report_outer_gamma(void);
/* A function of the application named like the profiler's API. */
void mp_prof_sample_hook(void);
/* qsort calls back: sites_pc is a return address inside libc. */
void report_site_libc(void);

/* The sites_pc of report_site_alpha, report_outer_gamma and
 * mp_prof_sample_hook, in that order. */
void sites_three_pcs(uintptr_t pcs[3]);

#endif
