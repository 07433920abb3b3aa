/* SPDX-License-Identifier: MIT */
/* The preload's allocator statistics hook: the provider's optional
 * P_stats() (<mimprof/sys.h>) as the session's mp_prof_allocator_stats_fn.
 * Compiled into each preload object with MP_PRELOAD_PROVIDER naming its
 * provider (cli/meson.build).
 *
 * mimalloc keeps no resident figure (its committed bytes include pages
 * never touched), so for it the hook measures one: the resident pages of
 * the granules mi_is_in_heap_region() claims (rt_resident.c). jemalloc
 * gives stats.resident itself. */
#include <mimprof/sys.h>

#include "rt_resident.h"
#include "rt_stats.h"

#define CAT2(a, b) a##_##b
#define CAT(a, b)  CAT2(a, b)

#ifdef MP_PRELOAD_IS_MIMALLOC
static bool mimalloc_owns(const void *p) { return mi_is_in_heap_region(p); }
#endif

static bool provider_stats(void *ctx, mp_prof_allocator_stats *out)
{
    (void)ctx;
    mp_sys_stats s;
    if (!CAT(MP_PRELOAD_PROVIDER, stats)(&s))
        return false;
#ifdef MP_PRELOAD_IS_MIMALLOC
    uint64_t resident;
    if (s.resident == MP_SYS_STAT_NONE && mpt_rt_resident_bytes(mimalloc_owns, &resident))
        s.resident = resident;
#endif
    /* MP_SYS_STAT_NONE and MP_PROF_STAT_NONE are both all ones. */
    *out = (mp_prof_allocator_stats){s.allocated, s.active,    s.resident,
                                     s.mapped,    s.committed, s.reserved};
    return true;
}

void mpt_rt_stats_attach(mp_profiler *p)
{
    mp_profiler_set_allocator_stats(p, MP_PRELOAD_PROVIDER_NAME, provider_stats, NULL);
}
