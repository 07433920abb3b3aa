/* SPDX-License-Identifier: MIT */
/* <mimprof/sampling_foreign.h>: the countdown's address is the calling
 * thread's own, and an allocator written only with the foreign entry
 * points (as the Rust crate is) is observed, samples, keeps its live
 * entries through a failed realloc and forgets them on free. */
#include "helpers.h"

#include <mimprof/sampling_foreign.h>
#include <mimprof/sys.h>
#include <pthread.h>

/* p = 1 - exp(-S) is 1 for S >= 40: with a 1-byte interval every
 * allocation of 64 bytes or more is sampled with weight 1. */
#define ALWAYS          1
#define IMPOSSIBLE_SIZE (SIZE_MAX / 2 - 4096)

/* The protocol of the header's comment, over mimalloc, through a pointer
 * to the countdown only (as a language without C thread-locals does). */
static __thread uint64_t *f_cd;

static uint64_t *countdown(void)
{
    if (f_cd == NULL)
        f_cd = mp_prof_foreign_countdown();
    return f_cd;
}

static int consume(size_t n) { return (int64_t)(*countdown() -= (uint64_t)n) < 0; }

static void *f_alloc(size_t n)
{
    if (consume(n))
        return mp_prof_hook_sample(mp_sys_mimalloc_alloc(n, 16), n);
    return mp_sys_mimalloc_alloc(n, 16);
}

static void f_dealloc(void *p, size_t n)
{
    if (mp_prof_hook_maybe_sampled(p))
        mp_prof_hook_forget(p);
    mp_sys_mimalloc_dealloc(p, n, 16);
}

static void *f_realloc(void *p, size_t old, size_t n)
{
    int hit = consume(n);
    if (hit || mp_prof_hook_maybe_sampled(p)) {
        uint64_t id = mp_prof_hook_maybe_sampled(p) ? mp_prof_hook_live_id(p) : 0;
        void *q = mp_sys_mimalloc_realloc(p, old, 16, n);
        if (q != NULL && id != 0)
            mp_prof_hook_forget_id(p, id);
        return hit ? mp_prof_hook_sample(q, n) : q;
    }
    return mp_sys_mimalloc_realloc(p, old, 16, n);
}

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

static void *other_thread(void *arg)
{
    (void)arg;
    return mp_prof_foreign_countdown();
}

Test(foreign, the_countdown_is_the_threads_own, .timeout = 60)
{
    cr_assert_eq(mp_prof_foreign_countdown(), &mp_prof_hook_countdown);
    pthread_t t;
    void *theirs = NULL;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, &theirs);
    cr_assert_neq(theirs, (void *)&mp_prof_hook_countdown, "another thread, another countdown");
    uint64_t saved = mp_prof_hook_countdown;
    *mp_prof_foreign_countdown() = 12345;
    cr_assert_eq(mp_prof_hook_countdown, 12345);
    mp_prof_hook_countdown = saved;
    cr_assert_eq(mp_prof_foreign_filter_size(), sizeof(mp_prof_hook_filter_t));
}

Test(foreign, an_allocator_of_foreign_entries_samples_and_forgets, .timeout = 60)
{
    f_dealloc(f_alloc(64), 64); /* observed: the thread's first hit */
    cr_assert(stats().allocator_observed);
    mp_prof_config c = test_config(ALWAYS, 1);
    mp_profiler *prof = test_start(&c);
    uint64_t live0 = stats().live_samples;
    void *p = f_alloc(4096);
    cr_assert_not_null(p);
    cr_assert_eq(stats().live_samples, live0 + 1, "sampled and live");
    cr_assert_null(f_realloc(p, 4096, IMPOSSIBLE_SIZE), "the provider fails");
    cr_assert_eq(stats().live_samples, live0 + 1, "rollback: the old block keeps its entry");
    void *q = f_realloc(p, 4096, 8192);
    cr_assert_not_null(q);
    cr_assert_eq(stats().live_samples, live0 + 1, "the old entry gone, the new one live");
    tp_profile prof_out;
    test_report(prof, &prof_out);
    cr_assert_eq(test_sum(&prof_out, "inuse_space", 0), 8192);
    tp_free(&prof_out);
    f_dealloc(q, 8192);
    cr_assert_eq(stats().live_samples, live0, "freed: forgotten");
    mp_profiler_free(prof);
}
