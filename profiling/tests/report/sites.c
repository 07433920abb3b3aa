/* SPDX-License-Identifier: MIT */
/* Call sites with known lines (see sites.h). Compiled -O2 -g. */
#define _GNU_SOURCE
#include "sites.h"

#include <stdlib.h>

volatile uintptr_t sites_pc;
volatile int sites_line;
volatile int sites_call_line;

__attribute__((noinline)) void sites_capture(int line)
{
    sites_pc = (uintptr_t)__builtin_return_address(0);
    sites_line = line;
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void report_site_alpha(void)
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

static inline __attribute__((always_inline)) void report_inlined_beta(void)
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void report_outer_gamma(void)
{
    sites_call_line = __LINE__ + 1;
    report_inlined_beta();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void mp_prof_sample_hook(void)
{
    sites_capture(__LINE__);
    __asm__ volatile("" ::: "memory");
}

static int cmp_capture(const void *a, const void *b)
{
    sites_pc = (uintptr_t)__builtin_return_address(0);
    return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) void report_site_libc(void)
{
    int v[2] = {2, 1};
    qsort(v, 2, sizeof v[0], cmp_capture);
    __asm__ volatile("" ::: "memory");
}

void sites_three_pcs(uintptr_t pcs[3])
{
    report_site_alpha();
    pcs[0] = sites_pc;
    report_outer_gamma();
    pcs[1] = sites_pc;
    mp_prof_sample_hook();
    pcs[2] = sites_pc;
}
