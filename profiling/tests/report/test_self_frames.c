/* SPDX-License-Identifier: MIT */
/* Profiler-frame filtering by address, with the profiler's code linked
 * into the main executable (static mode): hook sections are registered
 * as the sampling allocator does, and frames up to the outermost hook
 * frame are cut. Application functions named like the profiler stay. */
#include <criterion/criterion.h>
#include <dlfcn.h>

#include "self_frames.h"
#include "self_frames_internal.h"
#include "sites.h"

/* A "hook" in the section a sampling-allocator instantiation uses. */
__attribute__((section("mimprof_hooks"), noinline, used)) void test_fake_hook(void)
{
    __asm__ volatile(".rept 64\n\tnop\n\t.endr" ::: "memory"); /* 64+ bytes long */
}
extern char __start_mimprof_hooks[], __stop_mimprof_hooks[];

static uintptr_t hs, he;

static void setup(void)
{
    mp_self_frames_init();
    hs = (uintptr_t)__start_mimprof_hooks;
    he = (uintptr_t)__stop_mimprof_hooks;
    mp_self_frames_register(hs, he);
}

TestSuite(report_self_frames, .init = setup);

static uintptr_t app_pc(void (*f)(void))
{
    f();
    return sites_pc;
}

Test(report_self_frames, static_mode_detected)
{
    cr_assert(mp_self_frames_static_mode(), "the test links the profiler statically");
    cr_assert_lt(hs, he);
}

Test(report_self_frames, cuts_through_outermost_hook_frame)
{
    uintptr_t a = app_pc(report_site_alpha), g = app_pc(report_outer_gamma);
    /* capture, sample slow path (profiler code in the executable: not
     * recognizable by object), the hook, then the application. */
    uintptr_t pcs[] = {(uintptr_t)&mp_frames_skip_profiler + 8, (uintptr_t)&mp_self_frames_init + 8,
                       hs + 1, a, g};
    cr_assert_eq(mp_frames_skip_profiler(pcs, 5), 3);
    /* Hook first. */
    uintptr_t p2[] = {hs + 1, a};
    cr_assert_eq(mp_frames_skip_profiler(p2, 2), 1);
    /* No hook at all (e.g. a stack not captured from a hook): nothing cut. */
    uintptr_t p3[] = {a, g};
    cr_assert_eq(mp_frames_skip_profiler(p3, 2), 0);
    cr_assert_eq(mp_frames_skip_profiler(NULL, 0), 0);
    cr_assert_eq(mp_frames_skip_profiler(pcs, 0), 0);
}

Test(report_self_frames, range_boundaries_are_return_addresses)
{
    uintptr_t a = app_pc(report_site_alpha);
    /* A return address equal to `end` was a call at end - 1: inside. */
    uintptr_t in[] = {he, a};
    cr_assert_eq(mp_frames_skip_profiler(in, 2), 1);
    /* A return address equal to `start`: the call was before it. */
    uintptr_t out[] = {hs, a};
    cr_assert_eq(mp_frames_skip_profiler(out, 2), 0);
    uintptr_t past[] = {he + 1, a};
    cr_assert_eq(mp_frames_skip_profiler(past, 2), 0);
}

Test(report_self_frames, app_function_named_like_profiler_is_kept)
{
    /* mp_prof_sample_hook is an application function (sites.c), outside
     * every range: kept, whatever its name. */
    uintptr_t h = app_pc(mp_prof_sample_hook), a = app_pc(report_site_alpha);
    uintptr_t pcs[] = {hs + 2, h, a};
    cr_assert_eq(mp_frames_skip_profiler(pcs, 3), 1);
    uintptr_t p2[] = {h, a};
    cr_assert_eq(mp_frames_skip_profiler(p2, 2), 0);
}

Test(report_self_frames, scan_is_bounded)
{
    uintptr_t a = app_pc(report_site_alpha);
    uintptr_t pcs[MP_SELF_SCAN_FRAMES + 2];
    for (size_t i = 0; i < MP_SELF_SCAN_FRAMES + 2; i++)
        pcs[i] = a;
    pcs[MP_SELF_SCAN_FRAMES] = hs + 1; /* deeper than the scan window */
    cr_assert_eq(mp_frames_skip_profiler(pcs, MP_SELF_SCAN_FRAMES + 2), 0);
    pcs[MP_SELF_SCAN_FRAMES - 1] = hs + 1; /* the last frame of the window */
    cr_assert_eq(mp_frames_skip_profiler(pcs, MP_SELF_SCAN_FRAMES + 2), MP_SELF_SCAN_FRAMES + 1,
                 "through the hook, and the adjacent hook frame after it");
    pcs[MP_SELF_SCAN_FRAMES] = a;
    cr_assert_eq(mp_frames_skip_profiler(pcs, MP_SELF_SCAN_FRAMES + 2), MP_SELF_SCAN_FRAMES);
}

Test(report_self_frames, register_is_idempotent_and_bounded)
{
    uintptr_t s[MP_SELF_MAX_RANGES], e[MP_SELF_MAX_RANGES];
    int hk[MP_SELF_MAX_RANGES];
    size_t n0 = mp_self_frames_ranges(s, e, hk, MP_SELF_MAX_RANGES);
    mp_self_frames_register(hs, he);
    mp_self_frames_init();
    cr_assert_eq(mp_self_frames_ranges(s, e, hk, MP_SELF_MAX_RANGES), n0);
    for (uintptr_t i = 0; i < MP_SELF_MAX_RANGES + 5; i++)
        mp_self_frames_register(0x1000 + i * 0x100, 0x1000 + i * 0x100 + 0x10);
    cr_assert_eq(mp_self_frames_ranges(s, e, hk, MP_SELF_MAX_RANGES), MP_SELF_MAX_RANGES);
    cr_assert_eq(mp_self_frames_dropped(), n0 + 5);
    mp_self_frames_register(5, 5); /* empty: ignored */
    cr_assert_eq(mp_self_frames_dropped(), n0 + 5);
    /* The early ones still work. */
    uintptr_t pcs[] = {0x1001, 0x5};
    cr_assert_eq(mp_frames_skip_profiler(pcs, 2), 1);
}

Test(report_self_frames, libunwind_object_is_profiler_code)
{
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL)
        cr_skip_test("libunwind.so.8 not available");
    mp_self_frames_init();
    void *f = dlsym(h, "unw_backtrace");
    cr_assert_not_null(f);
    uintptr_t a = app_pc(report_site_alpha);
    uintptr_t pcs[] = {(uintptr_t)f + 4, a};
    cr_assert_eq(mp_frames_skip_profiler(pcs, 2), 1);
}
