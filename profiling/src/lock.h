/* SPDX-License-Identifier: MIT */
/* A mutex for the sampling path's short critical sections (live-table
 * stripes, a thread's ring): on Linux three states in one atomic word
 * and a futex (Drepper, "Futexes Are Tricky", mutex 2), so that taking
 * and releasing a free lock is one compare-and-swap and one exchange
 * inline, where glibc's pthread_mutex_lock/unlock cost ~55 instructions
 * a pair through two calls (BENCHMARKS.md, "One sample"); a waiter
 * sleeps in the kernel, as with a pthread mutex (no spinning: a holder
 * preempted by a waiter of higher priority still runs). Elsewhere a
 * pthread mutex.
 *
 * Not recursive, no owner. fork(): like the pthread mutexes it replaces,
 * never held across fork() by another thread (every holder holds
 * g_rec.rw or g_rec.session first, which the prepare handler takes). */
#ifndef MIMPROF_PROFILING_LOCK_H
#define MIMPROF_PROFILING_LOCK_H

#if defined(__linux__)
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct mp_lock {
    _Atomic int v; /* 0 free, 1 held, 2 held with waiters */
} mp_lock;

#define MP_LOCK_INIT                                                                               \
    {                                                                                              \
        0                                                                                          \
    }

static inline void mp_lock_init(mp_lock *l) { atomic_init(&l->v, 0); }

/* The futex calls keep errno: they run inside the program's malloc and
 * free, and FUTEX_WAIT fails with EAGAIN whenever the word moved on. */
static inline void mp_lock_futex_(mp_lock *l, int op, int val)
{
    int e = errno;
    (void)syscall(SYS_futex, &l->v, op, val, NULL, NULL, 0);
    errno = e;
}

/* The contended paths out of line and cold, like rwlock.h's: inlined,
 * their syscall made every holder save registers on its fast path. */
__attribute__((noinline, cold, unused)) static void mp_lock_wait_(mp_lock *l)
{
    while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0)
        mp_lock_futex_(l, FUTEX_WAIT_PRIVATE, 2);
}

static inline void mp_lock_take(mp_lock *l)
{
    int expected = 0;
    if (__builtin_expect(!atomic_compare_exchange_strong_explicit(
                             &l->v, &expected, 1, memory_order_acquire, memory_order_relaxed),
                         0))
        mp_lock_wait_(l);
}

__attribute__((noinline, cold, unused)) static void mp_lock_wake_(mp_lock *l)
{
    mp_lock_futex_(l, FUTEX_WAKE_PRIVATE, 1);
}

static inline void mp_lock_release(mp_lock *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2, 0))
        mp_lock_wake_(l);
}

#else
#include <pthread.h>

typedef struct mp_lock {
    pthread_mutex_t m;
} mp_lock;

#define MP_LOCK_INIT                                                                               \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER                                                                  \
    }

static inline void mp_lock_init(mp_lock *l) { pthread_mutex_init(&l->m, NULL); }
static inline void mp_lock_take(mp_lock *l) { pthread_mutex_lock(&l->m); }
static inline void mp_lock_release(mp_lock *l) { pthread_mutex_unlock(&l->m); }
#endif

#endif
