/* SPDX-License-Identifier: MIT */
/* Allocation sites of the end-to-end test (see e2e_sites.h); -O2 -g. */
#include "e2e_sites.h"

static e2e_alloc_fn alloc_fn;
volatile int e2e_alpha_line;

void e2e_sites_set_allocator(e2e_alloc_fn f) { alloc_fn = f; }

__attribute__((noinline)) void *e2e_site_alpha(size_t n)
{
    e2e_alpha_line = __LINE__ + 1;
    void *p = alloc_fn(n, 16);
    __asm__ volatile("" ::: "memory"); /* no tail call */
    return p;
}

static inline __attribute__((always_inline)) void *e2e_inlined_beta(size_t n)
{
    void *p = alloc_fn(n, 16);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *e2e_outer_gamma(size_t n)
{
    void *p = e2e_inlined_beta(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *mp_prof_hook_sample_app(size_t n)
{
    void *p = alloc_fn(n, 16);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *e2e_calls_report(mp_profiler *prof, size_t n, uint8_t **buf,
                                                 size_t *len)
{
    void *p = alloc_fn(n, 16);
    (void)mp_profiler_report(prof, buf, len);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *e2e_recurse(int depth, size_t n)
{
    void *p = depth > 0 ? e2e_recurse(depth - 1, n) : alloc_fn(n, 16);
    __asm__ volatile("" ::: "memory");
    return p;
}
