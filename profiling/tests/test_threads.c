/* SPDX-License-Identifier: MIT */
/* Concurrency: 8 threads allocating with cross-thread frees while another
 * thread reports; thread exit with buffered records; sampling hits after a
 * thread's ring was handed over (teardown drops). */
#include "helpers.h"

#include <mimprof/sys.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

/* ------------------------------------------------- cross-thread frees */

#define THREADS 8
#define SLOTS   64
#define BLOCK   512

struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void *slot[SLOTS];
    unsigned head, count;
    int done;
};

static struct mailbox boxes[THREADS];
static unsigned per_thread;
static _Atomic int producers_left;

static void post(struct mailbox *m, void *p)
{
    pthread_mutex_lock(&m->lock);
    while (m->count == SLOTS)
        pthread_cond_wait(&m->cond, &m->lock);
    m->slot[(m->head + m->count) % SLOTS] = p;
    m->count++;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

static void *take(struct mailbox *m)
{
    void *p = NULL;
    pthread_mutex_lock(&m->lock);
    while (m->count == 0 && !m->done)
        pthread_cond_wait(&m->cond, &m->lock);
    if (m->count != 0) {
        p = m->slot[m->head];
        m->head = (m->head + 1) % SLOTS;
        m->count--;
        pthread_cond_broadcast(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
    return p;
}

void *produce_site(unsigned i);
__attribute__((noinline)) void *produce_site(unsigned i)
{
    void *p = tmi_alloc(BLOCK, i % 4 == 0 ? 64 : 8);
    TEST_NO_TAIL(p);
    return p;
}

static void *producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    struct mailbox *out = &boxes[(id + 1) % THREADS];
    for (unsigned i = 0; i < per_thread; i++) {
        void *p = produce_site(i);
        cr_assert_not_null(p);
        /* a few go through realloc (same size class: stays a BLOCK) */
        if (i % 16 == 0)
            p = tmi_realloc(p, BLOCK, i % 4 == 0 ? 64 : 8, BLOCK);
        post(out, p);
    }
    pthread_mutex_lock(&out->lock);
    out->done = 1;
    pthread_cond_broadcast(&out->cond);
    pthread_mutex_unlock(&out->lock);
    atomic_fetch_sub(&producers_left, 1);
    return NULL;
}

static void *consumer(void *arg)
{
    struct mailbox *in = &boxes[(unsigned)(uintptr_t)arg];
    void *p;
    unsigned n = 0;
    while ((p = take(in)) != NULL)
        tmi_dealloc(p, n++ % 2 ? BLOCK : 0, 8); /* sized and unsized frees */
    return NULL;
}

struct reporter {
    mp_profiler *p;
    double objects; /* summed over every report */
    unsigned reports;
    unsigned interval_samples; /* stacks x reports */
};

static void collect(struct reporter *r)
{
    tp_profile prof;
    test_report(r->p, &prof);
    r->objects += (double)test_sum(&prof, "alloc_objects", 1);
    for (size_t i = 0; i < prof.nsamples; i++)
        r->interval_samples += tp_label_str(&prof, &prof.samples[i], "__delta__") != NULL;
    r->reports++;
    tp_free(&prof);
}

static void *reporter(void *arg)
{
    struct reporter *r = arg;
    while (atomic_load(&producers_left) > 0) {
        collect(r);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Every sampling hit is accounted for: after the last report,
 * taken == reported + drops (+ discarded, none here), nothing is left in
 * rings or shards, and inuse returns to zero. The reports' alloc_objects
 * add up to reported x w (each sample of this size weighs w), up to one
 * rounding per sample row. */
Test(threads, eight_threads_cross_thread_frees_and_concurrent_reports, .timeout = 180)
{
    per_thread = TEST_TSAN ? 4000 : TEST_SANITIZED ? 10000 : 40000;
    const size_t R = 4096;
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(R, 12);
    c.ring_capacity = 8; /* small rings: constant handoffs to the shards */
    mp_profiler *p = test_start(&c);
    mp_prof_stats s0 = stats();

    pthread_t prod[THREADS], cons[THREADS], rep;
    struct reporter r = {.p = p};
    atomic_store(&producers_left, THREADS);
    for (unsigned i = 0; i < THREADS; i++) {
        boxes[i] = (struct mailbox){.head = 0};
        pthread_mutex_init(&boxes[i].lock, NULL);
        pthread_cond_init(&boxes[i].cond, NULL);
    }
    pthread_create(&rep, NULL, reporter, &r);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_create(&cons[i], NULL, consumer, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_create(&prod[i], NULL, producer, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(prod[i], NULL);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(cons[i], NULL);
    pthread_join(rep, NULL);
    collect(&r); /* the last report drains what is left */

    mp_prof_stats s = stats();
    uint64_t taken = s.samples_taken - s0.samples_taken;
    uint64_t reported = s.samples_reported - s0.samples_reported;
    uint64_t drops = (s.dropped_registration - s0.dropped_registration) +
                     (s.dropped_teardown - s0.dropped_teardown) +
                     (s.dropped_overflow_full - s0.dropped_overflow_full);
    cr_log_info("threads: %u reports, taken %llu, reported %llu, drops %llu (registration %llu)",
                r.reports, (unsigned long long)taken, (unsigned long long)reported,
                (unsigned long long)drops,
                (unsigned long long)(s.dropped_registration - s0.dropped_registration));
    cr_assert_gt(taken, 0);
    cr_assert_eq(s.ring_records, 0);
    cr_assert_eq(s.overflow_records, 0);
    cr_assert_eq(s.records_discarded, s0.records_discarded);
    cr_assert_eq(taken, reported + drops, "taken %llu != reported %llu + drops %llu",
                 (unsigned long long)taken, (unsigned long long)reported,
                 (unsigned long long)drops);
    cr_assert_eq(s.live_samples, 0, "inuse must return to zero");
    double w = 1.0 / test_p(BLOCK, (double)R);
    cr_assert(fabs(r.objects - (double)reported * w) <= r.interval_samples + 1,
              "objects %.1f vs reported x w = %.1f", r.objects, (double)reported * w);
    /* and the estimate of all allocations (malloc + realloc events) */
    double n = (double)THREADS * per_thread * (1.0 + 1.0 / 16);
    double expected = n - (double)drops * w;
    double tol = TEST_SIGMAS * test_sigma_objects(n, test_p(BLOCK, (double)R)) + r.interval_samples;
    cr_assert(fabs(r.objects - expected) <= tol, "objects %.0f, expected %.0f +- %.0f", r.objects,
              expected, tol);
    tp_profile last;
    test_report(p, &last);
    cr_assert_eq(test_sum(&last, "inuse_objects", 0), 0);
    tp_free(&last);
    mp_profiler_free(p);
}

/* ------------------------------------------------------- thread exit */

static void *sample_and_exit(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < n; i++)
        tmi_dealloc(tmi_alloc(100, 8), 100, 8);
    return NULL;
}

/* A thread that exits with records in its ring hands them to the overflow
 * shards; the next report has them. */
Test(threads, exit_with_buffered_records, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 13); /* every allocation, weight 1 */
    c.ring_capacity = 1024;
    mp_profiler *p = test_start(&c);
    pthread_t t;
    pthread_create(&t, NULL, sample_and_exit, (void *)(uintptr_t)100);
    pthread_join(t, NULL);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, 100);
    cr_assert_eq(s.ring_records, 0, "the exiting thread's ring was handed over");
    cr_assert_eq(s.overflow_records, 100);
    cr_assert_eq(s.registered_threads, 0);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), 100);
    cr_assert_eq(test_sum(&prof, "alloc_space", 1), 10000);
    tp_free(&prof);
    s = stats();
    cr_assert_eq(s.samples_reported, 100);
    cr_assert_eq(s.overflow_records, 0);
    mp_profiler_free(p);
}

/* Allocations made by thread-exit code that runs after the profiler's own
 * destructor (here: a later pthread key's) find no ring: counted as
 * dropped_teardown, never lost silently, never a crash. */
static pthread_key_t late_key;

static void late_destructor(void *v)
{
    (void)v;
    for (int i = 0; i < 3; i++)
        tmi_dealloc(tmi_alloc(200, 8), 200, 8);
}

static void *with_late_destructor(void *arg)
{
    (void)arg;
    pthread_setspecific(late_key, (void *)1);
    tmi_dealloc(tmi_alloc(100, 8), 100, 8); /* registers this thread's ring */
    return NULL;
}

Test(threads, hits_after_thread_teardown_are_counted, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 14);
    mp_profiler *p = test_start(&c);
    /* created after the profiler's key: its destructor runs after ours */
    cr_assert_eq(pthread_key_create(&late_key, late_destructor), 0);
    pthread_t t;
    pthread_create(&t, NULL, with_late_destructor, NULL);
    pthread_join(t, NULL);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, 4);
    cr_assert_eq(s.dropped_teardown, 3);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), 1);
    tp_free(&prof);
    s = stats();
    cr_assert_eq(s.samples_taken, s.samples_reported + s.dropped_teardown);
    mp_profiler_free(p);
}

/* Threads that outlive a session and keep allocating into the next one. */
static _Atomic int churn_stop;

static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop))
        tmi_dealloc(tmi_alloc(300, 8), 300, 8);
    return NULL;
}

Test(threads, sessions_restart_under_running_threads, .timeout = 120)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    pthread_t t[4];
    atomic_store(&churn_stop, 0);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    for (int round = 0; round < (TEST_SANITIZED ? 5 : 20); round++) {
        mp_prof_config c = test_config(2048, (uint64_t)round + 1);
        c.ring_capacity = 4;
        mp_profiler *p = test_start(&c);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        tp_profile prof;
        test_report(p, &prof);
        tp_free(&prof);
        if (round % 2)
            mp_profiler_stop(p);
        mp_profiler_free(p);
        mp_prof_stats s = stats();
        cr_assert_eq(s.live_samples, 0);
        cr_assert_eq(s.ring_records + s.overflow_records, 0);
    }
    atomic_store(&churn_stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, s.samples_reported + s.dropped_registration + s.dropped_teardown +
                                      s.dropped_overflow_full + s.records_discarded);
}

/* mp_prof_thread_exclude: an excluded thread's allocations are never
 * sampled, in this session and the next (the thread outlives the first);
 * a sampled block it frees still leaves the live set. Interval 1: every
 * allocation of an ordinary thread is a hit. */
static sem_t go_excluded, done_excluded;
static void *volatile excluded_frees;

static void *excluded(void *arg)
{
    (void)arg;
    mp_prof_thread_exclude();
    for (int round = 0; round < 2; round++) {
        sem_wait(&go_excluded);
        for (int i = 0; i < 1000; i++)
            tmi_dealloc(tmi_alloc(256, 8), 256, 8);
        tmi_dealloc(excluded_frees, 4096, 8); /* sampled on the main thread */
        sem_post(&done_excluded);
    }
    return NULL;
}

Test(threads, excluded_thread_is_never_sampled_and_its_frees_count, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    sem_init(&go_excluded, 0, 0);
    sem_init(&done_excluded, 0, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, excluded, NULL), 0);
    for (int round = 0; round < 2; round++) {
        mp_prof_config c = test_config(1, 3 + (uint64_t)round);
        mp_profiler *p = test_start(&c);
        excluded_frees = tmi_alloc(4096, 8);
        cr_assert_not_null(excluded_frees);
        mp_prof_stats s = stats();
        uint64_t taken = s.samples_taken;
        cr_assert_eq(s.live_samples, 1, "the main thread's block is sampled");
        sem_post(&go_excluded);
        sem_wait(&done_excluded);
        s = stats();
        cr_expect_eq(s.samples_taken, taken, "no hit on the excluded thread (session %d)", round);
        cr_expect_eq(s.live_samples, 0, "its free of a sampled block is tracked");
        mp_profiler_free(p);
    }
    pthread_join(t, NULL);
}
