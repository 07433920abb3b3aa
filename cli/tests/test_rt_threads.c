/* SPDX-License-Identifier: MIT */
/* The runtime's one-line state of every thread (runtime/rt_threads.h),
 * what a wait for the last report that ran out prints (issue 39): every
 * thread, its name, state and wait channel, the marked one marked. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/rt_threads.h"

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static _Atomic pid_t waiter_tid;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "stuck-one");
    atomic_store(&waiter_tid, (pid_t)syscall(SYS_gettid));
    pthread_mutex_lock(&held); /* blocks until the test lets it go */
    pthread_mutex_unlock(&held);
    return NULL;
}

Test(rt_threads, names_every_thread_its_state_and_the_marked_one, .timeout = 30)
{
    pthread_mutex_lock(&held);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter, NULL), 0);
    char want[64];
    pid_t tid;
    while ((tid = atomic_load(&waiter_tid)) == 0)
        usleep(1000);
    snprintf(want, sizeof want, " %ld stuck-one(reporter):S@", (long)tid);
    char line[2048];
    for (int tries = 0; tries < 2000; tries++) { /* until it sleeps on the mutex */
        mpt_rt_threads_describe(line, sizeof line, tid, "reporter");
        if (strstr(line, want) != NULL)
            break;
        usleep(1000);
    }
    cr_assert(strstr(line, want) != NULL, "no '%s' in '%s'", want, line);
    char self[32];
    snprintf(self, sizeof self, " %ld ", (long)getpid());
    cr_assert(strstr(line, self) != NULL, "the main thread is missing: '%s'", line);
    cr_assert(strstr(line, "(reporter)") == strstr(line, want) + strlen(want) - 13,
              "one thread marked: '%s'", line);
    pthread_mutex_unlock(&held);
    pthread_join(t, NULL);
}

Test(rt_threads, a_short_buffer_is_cut_and_terminated)
{
    char line[24];
    memset(line, 'x', sizeof line);
    size_t n = mpt_rt_threads_describe(line, sizeof line, 0, "reporter");
    cr_assert_lt(n, sizeof line);
    cr_assert_eq(line[n], '\0');
    cr_assert_eq(strlen(line), n);
}
