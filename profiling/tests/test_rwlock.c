/* SPDX-License-Identifier: MIT */
/* The recorder's reader/writer lock (src/rwlock.h) alone: a writer is
 * never inside with a reader or another writer, however readers and
 * writers interleave; a writer waits for every reader in flight, and a
 * waiting writer keeps new readers out. The shared data are plain
 * (non-atomic) words: under ThreadSanitizer a missing happens-before edge
 * between a reader and a writer is a reported race as well. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "rwlock.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define ROUNDS 20000
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define ROUNDS 20000
#endif
#endif
#ifndef ROUNDS
#define ROUNDS 200000
#endif

static mp_rwlock g_lock = MP_RWLOCK_INIT;
static _Atomic int g_readers_in, g_writers_in;
static _Atomic unsigned long g_violations;
static unsigned long g_data[2]; /* written by writers, read by readers */

static void *reader(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        mp_rw_rdlock(&g_lock);
        atomic_fetch_add_explicit(&g_readers_in, 1, memory_order_relaxed);
        if (atomic_load_explicit(&g_writers_in, memory_order_relaxed) != 0)
            atomic_fetch_add(&g_violations, 1);
        if (g_data[0] != g_data[1]) /* a writer's update seen half done */
            atomic_fetch_add(&g_violations, 1);
        atomic_fetch_sub_explicit(&g_readers_in, 1, memory_order_relaxed);
        mp_rw_rdunlock(&g_lock);
    }
    return NULL;
}

static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS / 100; i++) {
        mp_rw_wrlock(&g_lock);
        if (atomic_fetch_add_explicit(&g_writers_in, 1, memory_order_relaxed) != 0)
            atomic_fetch_add(&g_violations, 1);
        if (atomic_load_explicit(&g_readers_in, memory_order_relaxed) != 0)
            atomic_fetch_add(&g_violations, 1);
        g_data[0]++;
        sched_yield(); /* let readers arrive and back off */
        g_data[1]++;
        atomic_fetch_sub_explicit(&g_writers_in, 1, memory_order_relaxed);
        mp_rw_wrunlock(&g_lock);
    }
    return NULL;
}

Test(rwlock, writers_exclude_readers_and_each_other, .timeout = 120)
{
    pthread_t r[4], w[2];
    for (int i = 0; i < 4; i++)
        pthread_create(&r[i], NULL, reader, NULL);
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, writer, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(r[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    cr_assert_eq(atomic_load(&g_violations), 0);
    cr_assert_eq(g_data[0], 2ul * (ROUNDS / 100));
    cr_assert_eq(g_data[1], g_data[0]);
    cr_assert_eq(atomic_load(&g_lock.state), 0u, "every reader and writer left");
}

/* A writer waits for a reader already inside, and readers arriving while
 * it waits stay out until it has been in and left. */
static _Atomic int g_stage;

static void *waiting_writer(void *arg)
{
    (void)arg;
    atomic_store(&g_stage, 1);
    mp_rw_wrlock(&g_lock);
    atomic_store(&g_stage, 2);
    mp_rw_wrunlock(&g_lock);
    return NULL;
}

static void *late_reader(void *arg)
{
    (void)arg;
    mp_rw_rdlock(&g_lock);
    int stage = atomic_load(&g_stage); /* the writer was in before */
    mp_rw_rdunlock(&g_lock);
    return (void *)(intptr_t)stage;
}

static void sleep_ms(long ms)
{
    struct timespec t = {0, ms * 1000 * 1000};
    nanosleep(&t, NULL);
}

Test(rwlock, writer_waits_for_a_reader_inside_and_holds_back_new_ones, .timeout = 60)
{
    mp_rw_rdlock(&g_lock);
    pthread_t w, r;
    pthread_create(&w, NULL, waiting_writer, NULL);
    while (atomic_load(&g_stage) != 1)
        sched_yield();
    /* the writer's bit set: the word holds it and this reader */
    while (atomic_load(&g_lock.state) != (MP_RW_WRITER_ | 1u))
        sched_yield();
    pthread_create(&r, NULL, late_reader, NULL);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&g_stage), 1, "the writer waits for the reader inside");
    mp_rw_rdunlock(&g_lock);
    pthread_join(w, NULL);
    void *seen;
    pthread_join(r, &seen);
    cr_assert_eq((int)(intptr_t)seen, 2, "the late reader came in after the writer");
    cr_assert_eq(atomic_load(&g_lock.state), 0u);
}
