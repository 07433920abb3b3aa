/* SPDX-License-Identifier: MIT */
/* The preload runtime's signals and exits (rt_state.h): SIGUSR2 asks the
 * reporter for a report; a fatal signal the program leaves at its default
 * action, and _exit()/_Exit(), wait at most 2 s for a last one. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload_runtime.h"
#include "rt_signals.h"
#include "rt_state.h"
#include "rt_threads.h"

/* Fatal signals whose default action ends the process: a last report is
 * attempted when the program did not set a handler of its own. */
static const int FATAL_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                                    SIGSEGV, SIGBUS, SIGFPE, SIGILL};
enum { NFATAL = sizeof FATAL_SIGNALS / sizeof FATAL_SIGNALS[0] };

static void on_usr2(int sig)
{
    (void)sig;
    int saved = errno;
    mpt_rt_request();
    errno = saved;
}

/* The last report did not come in time: the reporter is stuck (on a lock
 * the calling thread holds, after a crash inside malloc; or a hang of its
 * own). One message says so with the state of every thread, the
 * reporter's marked, so that the log names what it waited in. */
static void say_stuck(int why)
{
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "mimprof: pid %ld: no last report (before %s) within 2 s; threads:",
                     (long)getpid(), why < 0 ? "_exit" : "a fatal signal");
    if (n <= 0 || (size_t)n >= sizeof line)
        return;
    mpt_rt_threads_describe(line + n, sizeof line - (size_t)n, atomic_load(&mpt_rt.reporter_tid),
                            "reporter");
    say("%s\n", line);
}

/* Asks the reporter for a last report and waits for it at most 2 s.
 * Async-signal-safe: a flag, a semaphore post and a futex wait on the
 * count of reports (woken by the reporter as soon as it is done: a
 * forked worker that ends with _exit() waits for its report, not for a
 * polling period). The reporter
 * may be blocked by a lock the calling thread holds (a crash inside
 * malloc): then the wait times out and the process goes on dying. Not in
 * the reporter itself, not in another process (a vfork child shares this
 * memory). */
static void last_report(int why)
{
    if (!mpt_rt.started || !mpt_rt.have_reporter || getpid() != mpt_rt.pid ||
        pthread_equal(pthread_self(), mpt_rt.reporter))
        return;
    unsigned before = atomic_load(&mpt_rt.reports_done);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&mpt_rt.fatal_sig, &expected, why))
        return;
    sem_post(&mpt_rt.wake);
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += 2;
    unsigned seen;
    while ((seen = atomic_load(&mpt_rt.reports_done)) == before) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct timespec left = {end.tv_sec - now.tv_sec, end.tv_nsec - now.tv_nsec};
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        if (left.tv_sec < 0) {
            say_stuck(why);
            return;
        }
        syscall(SYS_futex, &mpt_rt.reports_done, FUTEX_WAIT_PRIVATE, seen, &left, NULL, 0);
    }
}

static void on_fatal(int sig)
{
    int saved = errno;
    last_report(sig);
    /* SA_RESETHAND restored the default action; the re-raised signal is
     * delivered when this handler returns. */
    raise(sig);
    errno = saved;
}

/* _exit() and _Exit() skip atexit handlers; some programs (dash, servers'
 * forked workers) always end that way. The runtime's copies take the last
 * report first, then end the process as glibc's do. exit() is unaffected
 * (glibc calls its internal _exit, after the atexit report). */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    last_report(-1);
    for (;;)
        syscall(SYS_exit_group, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) { _exit(status); }

/* SIGUSR2 and the fatal signals, each while the program leaves it at its
 * default action; the program keeps seeing its own dispositions
 * (rt_signals.h). */
void mpt_rt_install_handlers(void)
{
    if (mpt_rt.handlers)
        return;
    mpt_rt.handlers = true;
    mpt_sig_take(SIGUSR2, on_usr2, SA_RESTART);
    for (size_t i = 0; i < NFATAL; i++)
        mpt_sig_take(FATAL_SIGNALS[i], on_fatal, SA_RESETHAND | SA_RESTART);
}
