/* SPDX-License-Identifier: MIT */
/* A writer-preferring reader/writer lock whose read side is one atomic
 * read-modify-write each way, with an explicit fork protocol.
 *
 * Readers (sampling hits) announce themselves in `readers` and then check
 * `writer`; a writer raises `writer` and then waits for `readers` to drain.
 * Both sides use sequentially consistent operations, so at least one of
 * them sees the other (Dekker): a reader that sees a writer backs out and
 * waits on the mutex/condition variable; a writer never proceeds while a
 * reader is inside. A waiting writer therefore also blocks new readers
 * (writers are not starved by a stream of hits). Not recursive: no code
 * path takes it for reading while holding it.
 *
 * Why not pthread_rwlock_t: the recorder's lock is held for writing across
 * fork() by the prepare handler, and glibc identifies a write owner by
 * thread id, which changes in the child, so the child could not unlock
 * it; re-initializing it instead leaves ThreadSanitizer believing it is
 * still held. Here the state is plain atomics plus a mutex that the
 * forking thread holds across fork() and unlocks in both processes. */
#ifndef MIMPROF_PROFILING_RWLOCK_H
#define MIMPROF_PROFILING_RWLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct mp_rwlock {
    _Atomic unsigned readers;
    _Atomic int writer;
    pthread_mutex_t m; /* writers, and readers that must wait */
    pthread_cond_t cv; /* writer gone (readers) / readers drained (writer) */
} mp_rwlock;

#define MP_RWLOCK_INIT                                                                             \
    {                                                                                              \
        0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER                                  \
    }

/* The read side's waits, out of line and cold: only a writer (a session
 * start or end, a snapshot's instant, fork) sends a reader here, and
 * inlined they made every caller save six registers (BENCHMARKS.md, "One
 * sample"). The operations and their order are those of the inline
 * versions they came from. */
__attribute__((noinline, cold, unused)) static void mp_rw_tell_writer_(mp_rwlock *l)
{
    /* the last reader out tells the waiting writer (under the mutex: the
     * writer checks `readers` and sleeps while holding it) */
    pthread_mutex_lock(&l->m);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_rdunlock(mp_rwlock *l)
{
    if (atomic_fetch_sub(&l->readers, 1) == 1 && atomic_load(&l->writer))
        mp_rw_tell_writer_(l);
}

/* A reader that saw a writer: backs out and waits for it to go. */
__attribute__((noinline, cold, unused)) static void mp_rw_back_off_(mp_rwlock *l)
{
    mp_rw_rdunlock(l); /* a writer is in or waiting: back off */
    pthread_mutex_lock(&l->m);
    while (atomic_load(&l->writer))
        pthread_cond_wait(&l->cv, &l->m);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_rdlock(mp_rwlock *l)
{
    for (;;) {
        atomic_fetch_add(&l->readers, 1);
        if (__builtin_expect(!atomic_load(&l->writer), 1))
            return;
        mp_rw_back_off_(l);
    }
}

static inline void mp_rw_wrlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    while (atomic_load(&l->writer))
        pthread_cond_wait(&l->cv, &l->m);
    atomic_store(&l->writer, 1);
    while (atomic_load(&l->readers) != 0)
        pthread_cond_wait(&l->cv, &l->m);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_wrunlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    atomic_store(&l->writer, 0);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->m);
}

/* fork(): the prepare handler takes the lock for writing and then its
 * mutex, so that no thread is inside any of the functions above when the
 * process is copied. */
static inline void mp_rw_fork_prepare(mp_rwlock *l)
{
    mp_rw_wrlock(l);
    pthread_mutex_lock(&l->m);
}

static inline void mp_rw_fork_parent(mp_rwlock *l)
{
    pthread_mutex_unlock(&l->m);
    mp_rw_wrunlock(l);
}

/* In the child only the forking thread exists: no reader, no waiter. */
static inline void mp_rw_fork_child(mp_rwlock *l)
{
    atomic_store(&l->readers, 0);
    atomic_store(&l->writer, 0);
    pthread_cond_init(&l->cv, NULL);
    pthread_mutex_unlock(&l->m);
}

#endif
