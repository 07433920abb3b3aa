/* SPDX-License-Identifier: MIT */
/* The preload runtime's reports (rt_state.h): each one written to the
 * output, handed to the Pyroscope agent and fed to the control's
 * /debug/pprof, and the reporter thread that takes them periodically, on
 * SIGUSR2, when the memory crosses --report-above, and on a fatal
 * signal. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "image_runtime.h"
#include "preload_runtime.h"
#include "rt_collector.h"
#include "rt_peak.h"
#include "rt_pyro.h"
#include "rt_state.h"
#include "rt_watch.h"

/* ---- reports --------------------------------------------------------- */

int64_t mpt_rt_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Writes the window's peak profile next to the report at `path` (in
 * directory mode; rt_peak.h). */
static void write_peak(const char *path, const uint8_t *pk, size_t pklen)
{
    char peak_path[4300], why[600];
    if (mpt_rt.out.dir[0] == '\0' || mpt_peak_name(path, peak_path, sizeof peak_path) != 0)
        return;
    if (mpt_out_write(peak_path, pk, pklen, mpt_rt.out.gzip, why, sizeof why) != 0)
        say_error("mimprof: %s; peak profile not written\n", why);
}

/* A report of the process's series, whoever asked for it (with the
 * comment `note`, when not NULL: why it is written), and the window's
 * peak (*pk NULL when there is none): both handed to the Pyroscope agent
 * when uploading; the report merged into the HTTP endpoint's cumulative
 * profile when it is served; *seq is its file number. report_lock held. */
mp_prof_status mpt_rt_take_report_locked(const char *note, uint8_t **buf, size_t *len, uint8_t **pk,
                                         size_t *pklen, mpt_rt_window *w)
{
    *pk = NULL;
    *pklen = 0;
    if (note != NULL)
        (void)mp_profiler_annotate(mpt_rt.prof, note);
    mp_prof_status st = mp_profiler_report(mpt_rt.prof, buf, len);
    if (st != MP_PROF_OK)
        return st;
    if (mp_profiler_report_peak(mpt_rt.prof, pk, pklen, NULL) != MP_PROF_OK) {
        *pk = NULL;
        *pklen = 0;
    }
    /* Windows are contiguous: each report's interval values (alloc_*)
     * cover exactly [previous report, now). */
    int64_t now = mpt_rt_now_ns();
    if (mpt_rt_pyro_on()) {
        mpt_rt_pyro_submit(*buf, *len, mpt_rt.window_from_ns, now, false);
        if (*pk != NULL)
            mpt_rt_pyro_submit(*pk, *pklen, mpt_rt.window_from_ns, now, true);
    }
    if (mpt_rt.http)
        (void)mp_prof_control_feed(mpt_rt.control, *buf, *len);
    w->from_ns = mpt_rt.window_from_ns;
    w->to_ns = now;
    w->conn = -1;
    w->final = mpt_rt.ending;
    mpt_rt.window_from_ns = now;
    mpt_rt.reports++;
    mpt_rt.last_report_ns = now;
    w->seq = mpt_rt.seq++;
    return MP_PROF_OK;
}

/* Whether reports go to the collector (to be written and/or uploaded). */
static bool coll_wanted(void)
{
    return mpt_coll_on() && ((mpt_rt.files && mpt_rt.out.dir[0] != '\0') || mpt_rt.coll_upload);
}

/* The collector cannot be reached: the process names its reports from
 * now on, as without a collector (MIMPROF_COLLECTOR_SYMBOLIZE; the
 * collector named them), so that no report it writes itself is
 * nameless. Once: its symbol tables are built at the next report. */
static void name_them_here(void)
{
    if (mpt_rt.coll_symbolize < 0 || mpt_rt.self_named)
        return;
    mpt_rt.self_named = true;
    (void)mp_profiler_set_symbolize(mpt_rt.prof, (mp_prof_symbolize)mpt_rt.coll_symbolize);
}

/* Hands report w->seq to the collector, when there is one and it takes
 * it (rt_collector.h): to be written (directory mode) and/or uploaded.
 * The first report a process handles itself instead says why (and that
 * it is not uploaded); the count goes with the process's last one. */
static bool to_collector(const uint8_t *buf, size_t len, const uint8_t *pk, size_t pklen,
                         const mpt_rt_window *w)
{
    unsigned flags = (w->final ? MPT_COLL_FINAL : 0) |
                     (mpt_rt.files && mpt_rt.out.dir[0] != '\0' ? MPT_COLL_WRITE : 0) |
                     (mpt_rt.coll_upload ? MPT_COLL_UPLOAD : 0);
    if (!mpt_coll_on() || !(flags & (MPT_COLL_WRITE | MPT_COLL_UPLOAD))) {
        if (w->conn >= 0)
            close(w->conn);
        return false;
    }
    const char *why;
    if (mpt_coll_send_report(w->conn, mpt_rt.pid, w->seq, buf, len, pk, pklen, w->from_ns, w->to_ns,
                             flags, &why) == 0)
        return true;
    name_them_here();
    unsigned n = mpt_coll_fallbacks();
    if (n == 1 || w->final)
        say_error("mimprof: pid %ld: the collector did not take report %u (%s): %s (%u so "
                  "far)\n",
                  (long)mpt_rt.pid, w->seq, why,
                  !mpt_rt.files        ? "not uploaded"
                  : mpt_rt.coll_upload ? "written by the process itself, not uploaded"
                                       : "written by the process itself",
                  n);
    return false;
}

/* Reports this process could not write (a full disk): the first is said,
 * the rest counted and said with the last report (never a line each).
 * Kept with the pid that counted them: a forked child starts at 0. */
static _Atomic unsigned long g_lost; /* pid << 32 | count */

static unsigned count_lost(void)
{
    unsigned long pid = (unsigned long)(uint32_t)mpt_rt.pid, old = atomic_load(&g_lost), next;
    do
        next = (old >> 32 == pid ? old + 1 : pid << 32 | 1);
    while (!atomic_compare_exchange_weak(&g_lost, &old, next));
    return (unsigned)(next & 0xffffffffu);
}

static unsigned lost_so_far(void)
{
    unsigned long v = atomic_load(&g_lost);
    return v >> 32 == (unsigned long)(uint32_t)mpt_rt.pid ? (unsigned)(v & 0xffffffffu) : 0;
}

/* Writes report w->seq (and its peak, when there is one) to the output,
 * when reports are written: through the collector when there is one. */
bool mpt_rt_write_report(const uint8_t *buf, size_t len, const uint8_t *pk, size_t pklen,
                         const mpt_rt_window *w)
{
    if (to_collector(buf, len, pk, pklen, w))
        return mpt_rt.files && mpt_rt.out.dir[0] != '\0';
    if (!mpt_rt.files)
        return false;
    unsigned seq = w->seq;
    char path[4200], why[600];
    if (mpt_out_name(&mpt_rt.out, mpt_rt.pid, seq, path, sizeof path) != 0)
        say_error("mimprof: report path too long\n");
    else if (mpt_out_write(path, buf, len, mpt_rt.out.gzip, why, sizeof why) != 0) {
        unsigned n = count_lost();
        if (n == 1)
            say_error("mimprof: %s; report not written (the next ones are counted)\n", why);
        else if (w->final)
            say_error("mimprof: pid %ld: %u reports not written (the last: %s)\n", (long)mpt_rt.pid,
                      n, why);
        return false;
    } else if (pk != NULL) {
        write_peak(path, pk, pklen);
    }
    if (w->final && lost_so_far() > 1)
        say_error("mimprof: pid %ld: %u reports not written before its last\n", (long)mpt_rt.pid,
                  lost_so_far());
    return false;
}

/* Takes one report and writes it. Called by the reporter thread, or by
 * the exit path after the reporter is gone. */
void mpt_rt_report_once(const char *note)
{
    uint8_t *buf = NULL, *pk = NULL;
    size_t len = 0, pklen = 0;
    mpt_rt_window w;
    /* The collector reached before the report is taken: one it will not
     * take is named here (name_them_here), never written nameless. */
    const char *why;
    int conn = coll_wanted() ? mpt_coll_dial(&why) : -1;
    if (conn < 0 && coll_wanted())
        name_them_here();
    pthread_mutex_lock(&mpt_rt.report_lock);
    mp_prof_status st = mpt_rt_take_report_locked(note, &buf, &len, &pk, &pklen, &w);
    pthread_mutex_unlock(&mpt_rt.report_lock);
    if (st != MP_PROF_OK) {
        if (conn >= 0)
            close(conn);
        say("mimprof: report failed: %s\n", mp_prof_strerror(st));
        return;
    }
    w.conn = conn;
    mpt_rt_write_report(buf, len, pk, pklen, &w);
    mp_prof_buffer_free(buf);
    mp_prof_buffer_free(pk);
}

/* ---- the reporter thread --------------------------------------------- */

/* A report attempt is over: counted, and a thread waiting for it in a
 * signal handler or _exit() (rt_fatal.c) woken at once. */
static void report_done(void)
{
    atomic_fetch_add(&mpt_rt.reports_done, 1);
    syscall(SYS_futex, &mpt_rt.reports_done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void *mpt_rt_reporter_main(void *arg)
{
    (void)arg;
    /* Signals are for the application's threads; this one only waits.
     * What it allocates (handing reports to the Pyroscope agent, which
     * fits and gzips them here) is the profiler's, not the program's. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    mp_prof_thread_exclude();
    atomic_store(&mpt_rt.reporter_tid, (pid_t)syscall(SYS_gettid));
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    if ((mpt_rt_pyro_on() || mpt_rt.coll_upload) && mpt_rt.every_ms > 0) {
        /* Uploads on wall-clock multiples of the period, like Pyroscope's
         * own agents (the first window is shorter). */
        int64_t now_ms = (int64_t)next.tv_sec * 1000 + next.tv_nsec / 1000000;
        int64_t at = (now_ms / (int64_t)mpt_rt.every_ms + 1) * (int64_t)mpt_rt.every_ms;
        next.tv_sec = (time_t)(at / 1000);
        next.tv_nsec = (long)(at % 1000) * 1000000L;
    } else {
        mpt_rt_timespec_add_ms(&next, mpt_rt.every_ms);
    }
    for (;;) {
        /* With --report-above the wait also ends every MPT_WATCH_POLL_MS
         * to look at the memory (rt_watch.h). */
        struct timespec until = next;
        bool watching = mpt_watch_on();
        if (watching) {
            struct timespec poll;
            clock_gettime(CLOCK_REALTIME, &poll);
            mpt_rt_timespec_add_ms(&poll, MPT_WATCH_POLL_MS);
            if (mpt_rt.every_ms == 0 || poll.tv_sec < next.tv_sec ||
                (poll.tv_sec == next.tv_sec && poll.tv_nsec < next.tv_nsec))
                until = poll;
        }
        int r = mpt_rt_wait(&mpt_rt.wake, mpt_rt.every_ms > 0 || watching ? &until : NULL);
        if (atomic_load(&mpt_rt.stop_req)) {
            /* A report asked for (SIGUSR2) and not taken yet is taken
             * now: the exit that follows a request never drops it. */
            if (atomic_exchange(&mpt_rt.report_req, false)) {
                mpt_rt_report_once(NULL);
                report_done();
            }
            break;
        }
        bool timed_out = false;
        if (r != 0 && mpt_rt.every_ms > 0) { /* the period's deadline, or only a look? */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            timed_out = now.tv_sec > next.tv_sec ||
                        (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec);
        }
        char above[400];
        bool crossed = watching && mpt_watch_check(above, sizeof above);
        if (crossed)
            mpt_rt_image_request(); /* with the image options: an image too */
        if (timed_out) {
            /* The next period starts from the deadline; after a stall
             * (suspended process) from now, without catching up. */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            mpt_rt_timespec_add_ms(&next, mpt_rt.every_ms);
            if (now.tv_sec > next.tv_sec) {
                next = now;
                mpt_rt_timespec_add_ms(&next, mpt_rt.every_ms);
            }
        }
        bool asked = atomic_exchange(&mpt_rt.report_req, false);
        int fatal = atomic_load(&mpt_rt.fatal_sig);
        if (!timed_out && !asked && fatal == 0 && !crossed)
            continue; /* a stale post, or a look at the memory */
        mpt_rt_report_once(crossed ? above : NULL);
        /* The report's memory is free: its pages go back now, not kept
         * dirty until the next report (private memory in every forked
         * worker, cli/README.md). */
        if (fatal != 0)
            mpt_rt_pyro_finish(); /* the waiting handler gives up after 2 s */
        else
            mp_preload_trim_thread();
        report_done();
        if (fatal != 0)
            break; /* the process is about to die: no more reports */
    }
    return NULL;
}

void mpt_rt_request(void)
{
    mpt_rt_image_request(); /* MIMPROF_IMAGE: a heap image too (image_runtime.h) */
    atomic_store(&mpt_rt.report_req, true);
    sem_post(&mpt_rt.wake);
}
