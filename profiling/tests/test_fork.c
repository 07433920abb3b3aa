/* SPDX-License-Identifier: MIT */
/* fork(): the child keeps a working allocator, the parent's session is
 * ended there (its handle answers INACTIVE), a new session can start in
 * the child and reports the sampled blocks the child inherited as in-use
 * (but none of the parent's allocations), and nothing deadlocks, also
 * while other threads sample. */
#include "helpers.h"
#include "internal.h"

#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

/* Child-side checks report by exit code (assertions do not cross fork). */
#define CHILD_CHECK(cond, code)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            _exit(code);                                                                           \
    } while (0)

/* `held`: the bytes of the sampled blocks live at the fork (-1: unknown,
 * other threads were sampling). */
static int child_body(mp_profiler *inherited, int64_t held)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    CHILD_CHECK(!s.active, 10);
    CHILD_CHECK(held < 0 || s.live_samples == 1, 11);
    CHILD_CHECK(mp_profiler_report(inherited, &buf, &len) == MP_PROF_E_INACTIVE, 12);
    /* the allocator works (sampled and unsampled paths) */
    for (int i = 0; i < 20000; i++) {
        void *p = tmi_alloc((size_t)(16 + i % 5000), 8);
        CHILD_CHECK(p != NULL, 13);
        tmi_dealloc(p, 0, 8);
    }
    /* a new session in the child */
    mp_prof_config c = test_config(1, 77);
    mp_profiler *q = NULL;
    CHILD_CHECK(mp_profiler_start(&c, &q) == MP_PROF_OK, 14);
    void *keep = tmi_alloc(4000, 8);
    CHILD_CHECK(mp_profiler_report(q, &buf, &len) == MP_PROF_OK, 15);
    tp_profile prof;
    CHILD_CHECK(tp_decode(buf, len, &prof), 16);
    int k = tp_type_index(&prof, "inuse_space"), a = tp_type_index(&prof, "alloc_space");
    int64_t inuse = 0, alloc = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        inuse += prof.samples[i].values[k];
        alloc += prof.samples[i].values[a];
    }
    CHILD_CHECK(held < 0 ? inuse >= 4000 : inuse == 4000 + held, 17);
    CHILD_CHECK(alloc == 4000, 18); /* its own allocations only */
    tp_free(&prof);
    mp_prof_buffer_free(buf);
    tmi_dealloc(keep, 4000, 8);
    mp_profiler_free(q);
    mp_profiler_stop(inherited); /* safe, no effect */
    mp_profiler_free(inherited);
    return 0;
}

static int wait_child(pid_t pid)
{
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died (signal %d)",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return WEXITSTATUS(status);
}

Test(fork, child_ends_the_inherited_session_and_its_own_reports_what_it_inherited, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 76);
    mp_profiler *p = test_start(&c);
    void *live = tmi_alloc(1000, 8);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(30);
        _exit(child_body(p, 1000));
    }
    cr_assert_eq(wait_child(pid), 0, "child check %d failed", 0);
    /* the parent's session is untouched */
    mp_prof_stats s = stats();
    cr_assert(s.active);
    cr_assert_eq(s.live_samples, 1);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 1000);
    tp_free(&prof);
    tmi_dealloc(live, 1000, 8);
    mp_profiler_free(p);
}

/* The child's report: in-use and allocation bytes, or -1 on failure. */
static int child_report(mp_profiler *q, int64_t *inuse, int64_t *alloc)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    tp_profile prof;
    if (mp_profiler_report(q, &buf, &len) != MP_PROF_OK || !tp_decode(buf, len, &prof))
        return -1;
    int k = tp_type_index(&prof, "inuse_space"), a = tp_type_index(&prof, "alloc_space");
    *inuse = *alloc = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        *inuse += prof.samples[i].values[k];
        *alloc += prof.samples[i].values[a];
    }
    tp_free(&prof);
    mp_prof_buffer_free(buf);
    return 0;
}

enum { HELD = 49, OWN = 10, FREED = 9 };
#define MB ((int64_t)1 << 20)

/* A parent holding 49 MiB forks; the child frees 9 of the inherited
 * blocks and allocates 10 MiB of its own. With an interval of one byte
 * every block is sampled with weight 1, so the values are exact: in-use
 * 40 + 10 MiB (what is live in the child), allocations 10 MiB (the
 * child's own; the parent's are not the child's). With `drop`, the child
 * lets its inheritance go first (mp_profiler_drop_inherited) and reports
 * its own blocks only. */
static void inherit_case(bool drop)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 79);
    mp_profiler *p = test_start(&c);
    void *held[HELD];
    for (int i = 0; i < HELD; i++)
        cr_assert_not_null(held[i] = tmi_alloc((size_t)MB, 8));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(30);
        for (int i = 0; i < FREED; i++) /* frees without a session still count */
            tmi_dealloc(held[i], (size_t)MB, 8);
        if (drop)
            mp_profiler_drop_inherited();
        mp_prof_stats s;
        mp_prof_diagnostics(&s);
        CHILD_CHECK(s.live_samples == (drop ? 0u : (uint64_t)(HELD - FREED)), 20);
        mp_profiler *q = NULL;
        CHILD_CHECK(mp_profiler_start(&c, &q) == MP_PROF_OK, 21);
        void *own[OWN];
        for (int i = 0; i < OWN; i++)
            CHILD_CHECK((own[i] = tmi_alloc((size_t)MB, 8)) != NULL, 22);
        int64_t inuse, alloc;
        CHILD_CHECK(child_report(q, &inuse, &alloc) == 0, 23);
        CHILD_CHECK(inuse == (drop ? OWN : HELD - FREED + OWN) * MB, 24);
        CHILD_CHECK(alloc == OWN * MB, 25);
        _exit(0);
    }
    cr_assert_eq(wait_child(pid), 0, "child check failed");
    tp_profile prof; /* the parent's view is its own */
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), HELD * MB);
    cr_assert_eq(test_sum(&prof, "alloc_space", 1), HELD * MB);
    tp_free(&prof);
    for (int i = 0; i < HELD; i++)
        tmi_dealloc(held[i], (size_t)MB, 8);
    mp_profiler_free(p);
}

Test(fork, child_reports_inherited_blocks_as_inuse_and_only_its_own_allocations, .timeout = 60)
{
    inherit_case(false);
}

Test(fork, child_can_drop_its_inheritance, .timeout = 60) { inherit_case(true); }

static _Atomic int stop_threads;

/* Sanitizer builds park the other threads outside any allocation around
 * each fork: the sanitizer runtimes of clang 14 do not lock their own
 * allocators across fork() (AddressSanitizer does since LLVM 18,
 * llvm-project#75290; ThreadSanitizer since LLVM 19, #96600), so a child
 * forked while another thread is inside malloc() can block forever in the
 * sanitizer's allocator (seen here: the child waiting in
 * SizeClassAllocator64::GetFromAllocator under calloc). The profiler's own
 * locks are what this test is about; the gcc build forks with every thread
 * running. */
static _Atomic int park_threads, parked;

static void park_point(void)
{
    if (!atomic_load(&park_threads))
        return;
    atomic_fetch_add(&parked, 1);
    while (atomic_load(&park_threads))
        sched_yield();
    atomic_fetch_sub(&parked, 1);
}

static void *hammer(void *arg)
{
    (void)arg;
    unsigned i = 0;
    while (!atomic_load(&stop_threads)) {
        park_point();
        void *p = tmi_alloc(64 + (i++ % 2000), 8);
        tmi_dealloc(p, 0, 8);
    }
    return NULL;
}

static void *reporter(void *arg)
{
    mp_profiler *p = arg;
    while (!atomic_load(&stop_threads)) {
        park_point();
        uint8_t *buf;
        size_t len;
        if (mp_profiler_report(p, &buf, &len) == MP_PROF_OK)
            mp_prof_buffer_free(buf);
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Forks while four threads sample at a high rate and one reports: every
 * child must finish (no profiler lock inherited locked). */
Test(fork, no_deadlock_while_other_threads_sample_and_report, .timeout = 120)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(512, 78);
    c.ring_capacity = 4;
    mp_profiler *p = test_start(&c);
    pthread_t t[5];
    atomic_store(&stop_threads, 0);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, NULL);
    pthread_create(&t[4], NULL, reporter, p);
    int forks = TEST_SANITIZED ? 8 : 30;
    for (int i = 0; i < forks; i++) {
        if (TEST_SANITIZED) {
            atomic_store(&park_threads, 1);
            while (atomic_load(&parked) != 5)
                sched_yield();
        }
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            alarm(20);
            _exit(child_body(p, -1));
        }
        atomic_store(&park_threads, 0);
        int code = wait_child(pid);
        cr_assert_eq(code, 0, "fork %d: child check %d failed", i, code);
    }
    atomic_store(&stop_threads, 1);
    for (int i = 0; i < 5; i++)
        pthread_join(t[i], NULL);
    cr_assert(stats().active);
    mp_profiler_free(p);
}

/* ---- fork while another thread is inside a capture (issue 39) ----------
 * A capture runs libunwind and dl_iterate_phdr, whose locks a fork child
 * would inherit held: glibc's fork() does not reset the loader's
 * dl_load_write_lock, and libunwind takes its own with every signal
 * blocked, so such a child waits forever, deaf to alarm(), and so did its
 * parent in waitpid (the hang of no_deadlock_while_other_threads_sample_
 * and_report). The probe puts a thread inside a capture's walk, inside
 * dl_iterate_phdr, for 300 ms; the main thread forks meanwhile; the child
 * must be able to call dl_iterate_phdr. Before the fix the child blocked
 * there and alarm() ended it (signal 14). */
static _Atomic int probe_armed, probe_inside;

static int hold_loader_lock(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    (void)arg;
    atomic_store(&probe_inside, 1);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 1; /* one module is enough */
}

static void probe_in_capture(void)
{
    int one = 1;
    if (atomic_compare_exchange_strong(&probe_armed, &one, 0))
        dl_iterate_phdr(hold_loader_lock, NULL);
}

/* A capture that cannot end until the test has forked (a capture waiting
 * for the loader lock of a thread that waits for the forking thread). */
static _Atomic int probe_release;

static void probe_stuck_in_capture(void)
{
    int one = 1;
    if (!atomic_compare_exchange_strong(&probe_armed, &one, 0))
        return;
    atomic_store(&probe_inside, 1);
    while (!atomic_load(&probe_release))
        sched_yield();
}

/* Runs until the test has forked: a thread that ended unjoined before the
 * fork would be a leak to ThreadSanitizer in the child. */
static void *sample_once(void *arg)
{
    (void)arg;
    tmi_dealloc(tmi_alloc(100, 8), 100, 8); /* interval 1: sampled, captured */
    while (!atomic_load(&probe_release))
        sched_yield();
    return NULL;
}

static int count_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    ++*(int *)arg;
    return 0;
}

/* A session at a 1-byte interval and a thread `t` whose sampled
 * allocation's capture is inside `probe` when this returns. */
static mp_profiler *start_inside_capture(uint64_t seed, void (*probe)(void), pthread_t *t)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, seed);
    mp_profiler *p = test_start(&c);
    atomic_store(&probe_inside, 0);
    atomic_store(&probe_release, 0);
    atomic_store(&probe_armed, 1);
    mp_sampler_capture_probe = probe;
    pthread_create(t, NULL, sample_once, NULL);
    while (!atomic_load(&probe_inside))
        sched_yield();
    return p;
}

Test(fork, no_capture_in_progress_at_fork, .timeout = 60)
{
    pthread_t t;
    mp_profiler *p = start_inside_capture(80, probe_in_capture, &t);
    pid_t pid = fork(); /* the other thread is inside the loader's lock */
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        int modules = 0;
        dl_iterate_phdr(count_module, &modules);
        _exit(modules > 0 ? 0 : 3);
    }
    atomic_store(&probe_release, 1);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    pthread_join(t, NULL);
    mp_sampler_capture_probe = NULL;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child could not take the loader's lock (status %#x): the fork copied a "
              "capture in progress",
              (unsigned)status);
    mp_profiler_free(p);
}

/* While a fork is announced (between the prepare handler's first step
 * and fork()'s return), a capture that starts does not walk: its sample
 * is recorded, bytes and all, with an empty stack. */
Test(fork, a_capture_during_a_fork_records_an_empty_stack, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 81);
    mp_profiler *p = test_start(&c);
    mp_sampler_fork_prepare(); /* as fork()'s prepare handler begins */
    void *b = tmi_alloc(5000, 8);
    mp_sampler_fork_parent();
    void *d = tmi_alloc(7000, 8);
    tp_profile prof;
    test_report(p, &prof);
    int k = tp_type_index(&prof, "inuse_space");
    int64_t empty = 0, walked = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        if (prof.samples[i].nlocations == 0)
            empty += prof.samples[i].values[k];
        else
            walked += prof.samples[i].values[k];
    }
    cr_assert_eq(empty, 5000, "the sample taken during the fork: %lld B with no stack",
                 (long long)empty);
    cr_assert_eq(walked, 7000);
    tp_free(&prof);
    tmi_dealloc(b, 5000, 8);
    tmi_dealloc(d, 7000, 8);
    mp_profiler_free(p);
}

/* The wait for captures is bounded: a capture that cannot end before the
 * fork (in a program, one waiting for the loader lock of a thread that
 * waits for a lock the forking thread holds) delays fork() by about a
 * second, never forever. Here the capture ends only after fork()
 * returns: without the bound, fork() never would. */
Test(fork, a_capture_that_cannot_end_delays_fork_but_never_blocks_it, .timeout = 60)
{
    pthread_t t;
    mp_profiler *p = start_inside_capture(82, probe_stuck_in_capture, &t);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(0);
    atomic_store(&probe_release, 1);
    cr_assert_eq(wait_child(pid), 0);
    pthread_join(t, NULL);
    mp_sampler_capture_probe = NULL;
    mp_profiler_free(p);
}
