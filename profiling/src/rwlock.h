/* A writer-preferring reader/writer lock from one mutex and two condition
 * variables, with an explicit fork protocol.
 *
 * Why not pthread_rwlock_t: the recorder's lock is held for writing across
 * fork() by the prepare handler, and glibc identifies a write owner by
 * thread id, which changes in the child, so the child cannot unlock it;
 * re-initializing it instead leaves ThreadSanitizer believing it is still
 * held. Here the lock state is plain data under a mutex that the forking
 * thread holds across fork() and unlocks in both processes.
 *
 * Writers are preferred (a waiting writer blocks new readers), so stop()
 * and fork() are not starved by a stream of sampling hits. Not recursive:
 * no code path takes it for reading while holding it. */
#ifndef MIMPROF_PROFILING_RWLOCK_H
#define MIMPROF_PROFILING_RWLOCK_H

#include <pthread.h>
#include <stdbool.h>

typedef struct mp_rwlock {
    pthread_mutex_t m;
    pthread_cond_t can_read;
    pthread_cond_t can_write;
    unsigned readers;
    unsigned writers_waiting;
    bool writer;
} mp_rwlock;

#define MP_RWLOCK_INIT                                                                             \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, false \
    }

static inline void mp_rw_rdlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    while (l->writer || l->writers_waiting != 0)
        pthread_cond_wait(&l->can_read, &l->m);
    l->readers++;
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_rdunlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    if (--l->readers == 0 && l->writers_waiting != 0)
        pthread_cond_signal(&l->can_write);
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_wrlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    l->writers_waiting++;
    while (l->writer || l->readers != 0)
        pthread_cond_wait(&l->can_write, &l->m);
    l->writers_waiting--;
    l->writer = true;
    pthread_mutex_unlock(&l->m);
}

static inline void mp_rw_wrunlock(mp_rwlock *l)
{
    pthread_mutex_lock(&l->m);
    l->writer = false;
    if (l->writers_waiting != 0)
        pthread_cond_signal(&l->can_write);
    else
        pthread_cond_broadcast(&l->can_read);
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
    l->readers = 0;
    l->writers_waiting = 0;
    l->writer = false;
    pthread_cond_init(&l->can_read, NULL);
    pthread_cond_init(&l->can_write, NULL);
    pthread_mutex_unlock(&l->m);
}

#endif
