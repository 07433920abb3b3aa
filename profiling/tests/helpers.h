/* SPDX-License-Identifier: MIT */
/* Shared helpers of the profiling core's tests. */
#ifndef MIMPROF_TEST_HELPERS_H
#define MIMPROF_TEST_HELPERS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>

#include "pprof_decode.h"

/* Sanitizer builds run the same checks on smaller populations (the
 * tolerances are derived from the variance, so they widen accordingly). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_SANITIZED 1
#endif
#endif
#ifndef TEST_SANITIZED
#define TEST_SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

/* Keeps a call from being a tail call, so that the calling function's frame
 * is on the stack when the callee captures it. */
#define TEST_NO_TAIL(x) __asm__ volatile("" : : "g"(x) : "memory")

/* A thread barrier (POSIX barriers are optional: macOS has none). */
typedef struct test_barrier {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned count, waiting, round;
} test_barrier;

static inline void test_barrier_init(test_barrier *b, unsigned count)
{
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->count = count;
    b->waiting = 0;
    b->round = 0;
}

static inline void test_barrier_wait(test_barrier *b)
{
    pthread_mutex_lock(&b->mu);
    unsigned round = b->round;
    if (++b->waiting == b->count) {
        b->waiting = 0;
        b->round++;
        pthread_cond_broadcast(&b->cv);
    } else {
        while (round == b->round)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

/* Number of standard deviations a statistical check allows. With fixed
 * seeds the checks are deterministic; 5 sigma keeps a fresh seed's chance
 * of a false failure below 1e-6 per check. */
#define TEST_SIGMAS 5.0

static inline mp_prof_config test_config(size_t interval, uint64_t seed)
{
    mp_prof_config c;
    mp_prof_config_init(&c);
    c.sample_interval_bytes = interval;
    c.seed = seed;
    c.symbolize = MP_PROF_SYMBOLIZE_NONE;
    return c;
}

static inline mp_profiler *test_start(const mp_prof_config *c)
{
    mp_profiler *p = NULL;
    mp_prof_status st = mp_profiler_start(c, &p);
    cr_assert_eq(st, MP_PROF_OK, "start: %s", mp_prof_strerror(st));
    cr_assert_not_null(p);
    return p;
}

/* Reports and decodes; fails the test on any error. */
static inline void test_report(mp_profiler *p, tp_profile *out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report(p, &buf, &len);
    cr_assert_eq(st, MP_PROF_OK, "report: %s", mp_prof_strerror(st));
    cr_assert(tp_decode(buf, len, out), "the report does not decode as pprof");
    mp_prof_buffer_free(buf);
}

/* Sum of `type` over the interval (allocation) samples or the live ones. */
static inline int64_t test_sum(const tp_profile *p, const char *type, int interval)
{
    int k = tp_type_index(p, type);
    int64_t sum = 0;
    cr_assert_geq(k, 0, "no sample type %s", type);
    for (size_t i = 0; i < p->nsamples; i++) {
        const char *d = tp_label_str(p, &p->samples[i], "__delta__");
        int is_interval = d != NULL && strcmp(d, "false") == 0;
        if (is_interval == interval)
            sum += p->samples[i].values[k];
    }
    return sum;
}

/* The estimator's standard deviation of the object estimate for n
 * allocations of probability p: sqrt(n (1 - p) / p). */
static inline double test_sigma_objects(double n, double p) { return sqrt(n * (1.0 - p) / p); }

static inline double test_p(double size, double interval) { return -expm1(-size / interval); }

/* The descriptors open now, numbers below n, as flags in out (the
 * directory's own descriptor left out): what a test compares before and
 * after to see that the profiler holds none of the program's numbers. */
static inline void test_fds_now(bool *out, size_t n)
{
    memset(out, 0, n);
    DIR *d = opendir("/proc/self/fd");
    cr_assert(d != NULL);
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != self && (size_t)fd < n)
            out[fd] = true;
    }
    closedir(d);
}

#endif
