/* SPDX-License-Identifier: MIT */
/* A writer-preferring reader/writer lock whose read side is one atomic
 * read-modify-write and a sign test each way, with an explicit fork
 * protocol.
 *
 * One word: the readers inside in its low 31 bits, plus MP_RW_WRITER_
 * (the top bit) while a writer is in or waiting for readers to drain.
 * A reader adds 1 and is in if the result has no writer bit; a writer
 * sets the bit and then waits for the word to be the bit alone. Every
 * change is a read-modify-write of that one word, so they are totally
 * ordered: a reader whose add comes after the writer's bit backs out and
 * waits on the mutex/condition variable; one whose add comes before is
 * counted, and the writer waits for its subtract. A waiting writer
 * therefore also blocks new readers (writers are not starved by a stream
 * of hits). Not recursive: no code path takes it for reading while
 * holding it. The word counts fewer than 2^31 readers (threads inside
 * at once).
 *
 * The read side's hot path is `lock add; js` and `lock sub; js`: a
 * reader leaving while the bit is set always takes the cold path and
 * wakes the writer (which re-checks the word), so the common path needs
 * no compare against "last reader".
 *
 * Why not pthread_rwlock_t: the recorder's lock is held for writing across
 * fork() by the prepare handler, and glibc identifies a write owner by
 * thread id, which changes in the child, so the child could not unlock
 * it; re-initializing it instead leaves ThreadSanitizer believing it is
 * still held. Here the state is one atomic word plus a mutex that the
 * forking thread holds across fork() and unlocks in both processes. */
#ifndef MIMPROF_PROFILING_RWLOCK_H
#define MIMPROF_PROFILING_RWLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define MP_RW_WRITER_ 0x80000000u

typedef struct mp_rwlock {
    _Atomic unsigned state; /* readers inside + MP_RW_WRITER_ while a writer is */
    pthread_mutex_t m;      /* writers, and readers that must wait */
    pthread_cond_t cv;      /* writer gone (readers) / a reader left (writer) */
} mp_rwlock;

#define MP_RWLOCK_INIT                                                                             \
    {                                                                                              \
        0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER                                     \
    }

/* The read side's waits, out of line and cold: only a writer (a session
 * start or end, a snapshot's instant, fork) sends a reader here, and
 * inlined they made every caller save six registers (BENCHMARKS.md, "One
 * sample"). */
__attribute__((noinline, cold, unused)) static void mp_rw_tell_writer_(mp_rwlock *l)
{
    /* a reader left while a writer is in or waiting: wake it to re-check
     * the word (under the mutex: the writer checks it and sleeps while
     * holding the mutex, so the wake-up cannot fall between the two) */
    pthread_mutex_lock(&l->m);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_rdunlock(mp_rwlock *l)
{
    if (atomic_fetch_sub(&l->state, 1) - 1 >= MP_RW_WRITER_)
        mp_rw_tell_writer_(l);
}

/* A reader that saw a writer: backs out and waits for it to go. */
__attribute__((noinline, cold, unused)) static void mp_rw_back_off_(mp_rwlock *l)
{
    mp_rw_rdunlock(l); /* a writer is in or waiting: back off */
    pthread_mutex_lock(&l->m);
    while (atomic_load(&l->state) >= MP_RW_WRITER_)
        pthread_cond_wait(&l->cv, &l->m);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_rdlock(mp_rwlock *l)
{
    while (__builtin_expect(atomic_fetch_add(&l->state, 1) + 1 >= MP_RW_WRITER_, 0))
        mp_rw_back_off_(l);
}

static inline void mp_rw_wrlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    while (atomic_load(&l->state) >= MP_RW_WRITER_) /* another writer */
        pthread_cond_wait(&l->cv, &l->m);
    atomic_fetch_or(&l->state, MP_RW_WRITER_);
    while (atomic_load(&l->state) != MP_RW_WRITER_) /* readers inside */
        pthread_cond_wait(&l->cv, &l->m);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_wrunlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    atomic_fetch_and(&l->state, ~MP_RW_WRITER_); /* backing-off readers may still count */
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
    atomic_store(&l->state, 0);
    pthread_cond_init(&l->cv, NULL);
    pthread_mutex_unlock(&l->m);
}

#endif
