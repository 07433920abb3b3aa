/* SPDX-License-Identifier: MIT */
/* The self-frame filter's per-thread memory of a call site (sampler.c):
 * code registered as a hook range after a site's first samples is cut
 * from its next one. Linked with the shared library, as a program is: the
 * profiler's code is then not the main executable's, the mode in which a
 * thread remembers a first frame found outside it (in static mode it
 * never does, and this test checks the plain filter). */
#include "helpers.h"

#include <dlfcn.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

#define ALWAYS 1 /* a 1-byte interval: every allocation of 64 B is sampled */

static void observe(void) { tmi_dealloc(tmi_alloc(16, 8), 16, 8); }

void *site_becomes_hook(size_t n);
__attribute__((noinline)) void *site_becomes_hook(size_t n)
{
    void *q = tmi_alloc(n, 8);
    TEST_NO_TAIL(q);
    return q;
}

void *site_calls_hook(size_t n);
__attribute__((noinline)) void *site_calls_hook(size_t n)
{
    void *q = site_becomes_hook(n);
    TEST_NO_TAIL(q);
    return q;
}

static const char *leaf_name(uint64_t leaf)
{
    Dl_info info;
    cr_assert(dladdr((void *)(uintptr_t)(leaf - 1), &info) && info.dli_sname != NULL);
    return info.dli_sname;
}

Test(self_frames_cache, frames_registered_later_are_cut, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 7);
    mp_profiler *p = test_start(&c);
    void *x[3];
    x[0] = site_calls_hook(64);
    x[1] = site_calls_hook(64); /* the same first frame, remembered */
    tp_profile prof;
    test_report(p, &prof);
    uint64_t site = 0;
    for (size_t i = 0; i < prof.nsamples; i++)
        if (tp_label_str(&prof, &prof.samples[i], "__delta__") == NULL)
            site = tp_leaf_address(&prof, &prof.samples[i]);
    tp_free(&prof);
    cr_assert_str_eq(leaf_name(site), "site_becomes_hook");
    /* the report's address is the call's (the return address - 1) */
    mp_prof_hook_register((uintptr_t)site, (uintptr_t)site + 1);
    x[2] = site_calls_hook(64);
    test_report(p, &prof);
    int k = tp_type_index(&prof, "inuse_objects");
    cr_assert_geq(k, 0);
    int64_t at_site = 0, at_caller = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        if (tp_label_str(&prof, &prof.samples[i], "__delta__") != NULL)
            continue;
        const char *name = leaf_name(tp_leaf_address(&prof, &prof.samples[i]));
        at_site += strcmp(name, "site_becomes_hook") == 0 ? prof.samples[i].values[k] : 0;
        at_caller += strcmp(name, "site_calls_hook") == 0 ? prof.samples[i].values[k] : 0;
    }
    tp_free(&prof);
    cr_assert_eq(at_site, 2, "the two samples taken before the registration keep their frame");
    cr_assert_eq(at_caller, 1, "the sample after it starts at the caller");
    for (int i = 0; i < 3; i++)
        tmi_dealloc(x[i], 64, 8);
    mp_profiler_free(p);
}
