/* SPDX-License-Identifier: MIT */
/* Profiler-frame filtering with the profiler in a shared object of its
 * own (as libmimprof-profiling.so or the preload object): its executable
 * segments are profiler code; the application's are not, whatever the
 * names; no hook scan is needed. */
#include <criterion/criterion.h>

#include "self_frames.h"
#include "self_frames_internal.h"
#include "sites.h"

Test(report_self_frames_shared, profiler_object_ranges)
{
    mp_self_frames_init();
    cr_assert_not(mp_self_frames_static_mode());
    uintptr_t s[MP_SELF_MAX_RANGES], e[MP_SELF_MAX_RANGES];
    int hk[MP_SELF_MAX_RANGES];
    size_t n = mp_self_frames_ranges(s, e, hk, MP_SELF_MAX_RANGES);
    cr_assert_geq(n, 1);
    uintptr_t self = (uintptr_t)&mp_frames_skip_profiler;
    bool covered = false;
    for (size_t i = 0; i < n; i++)
        covered = covered || (self >= s[i] && self < e[i] && hk[i] == 0);
    cr_assert(covered, "the object holding the profiler is a range");

    report_site_alpha();
    uintptr_t a = sites_pc;
    mp_prof_sample_hook();
    uintptr_t h = sites_pc;
    uintptr_t pcs[] = {self + 4, (uintptr_t)&mp_self_frames_register + 4, h, a};
    cr_assert_eq(mp_frames_skip_profiler(pcs, 4), 2);
    /* The application's mp_prof_sample_hook is not cut. */
    uintptr_t p2[] = {h, a};
    cr_assert_eq(mp_frames_skip_profiler(p2, 2), 0);
    /* Without the static-mode scan, a registered hook deeper in the
     * stack does not cut the application frames above it. */
    mp_self_frames_register(0x10000, 0x10100);
    uintptr_t p3[] = {a, 0x10010, h};
    cr_assert_eq(mp_frames_skip_profiler(p3, 3), 0);
}
