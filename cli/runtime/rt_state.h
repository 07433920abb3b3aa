/* SPDX-License-Identifier: MIT */
/* The preload runtime's state and what its pieces call of each other
 * (preload_runtime.h for the contract). Not installed.
 *
 *   preload_runtime.c  the lifecycle: environment -> configuration,
 *                      session start and end, fork, exit
 *   rt_report.c        reports (written, uploaded, fed to the control)
 *                      and the reporter thread
 *   rt_fatal.c         SIGUSR2, the fatal signals and _exit: a last report
 *   rt_control.c       the hooks of the profiling library's control
 *                      (`mimprof ctl`, /debug/pprof)
 *
 * Threads: reports are taken under report_lock, by the reporter thread,
 * the control's thread (its report hook) and, at the end, the thread
 * running exit handlers after it has joined the reporter. Signal handlers
 * only post a semaphore and set atomic flags. Session start, stop and
 * fork hold lock (outside report_lock when both are held). */
#ifndef MIMPROF_TOOL_RT_STATE_H
#define MIMPROF_TOOL_RT_STATE_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

#include "rt_common.h"
#include "rt_output.h"

/* The runtime of this process (preload_runtime.c defines it). */
struct mpt_rt {
    pthread_mutex_t lock; /* start / stop / fork */
    bool started;         /* a session is running in this process */
    mp_profiler *prof;
    mp_prof_config cfg;
    mpt_out out;   /* where reports go (rt_output.h) */
    bool bare;     /* the bare preload: one report at exit, no thread, no handler */
    bool dormant;  /* MIMPROF_DORMANT: configured, no session until one is asked for */
    bool handlers; /* SIGUSR2 and the fatal signals taken (at the first session) */
    /* The control socket of `mimprof ctl` and /debug/pprof: the profiling
     * library's (<mimprof/profiling_control.h>), with this runtime's
     * hooks (below); NULL when not served. */
    mp_prof_control *control;
    bool http;             /* it serves /debug/pprof: every report is fed to it (report_lock) */
    bool ctl_child_serves; /* a forked child serves its own socket (its fork handler) */
    /* Serialises reports (the reporter's, the exit's, the control
     * socket's); inside mpt_rt.lock when both are held. */
    pthread_mutex_t report_lock;
    unsigned reports;       /* reports taken by this process (report_lock) */
    int64_t last_report_ns; /* wall clock of the last one, 0: none (report_lock) */
    uint64_t every_ms;
    bool follow_fork;
    bool quiet;
    pid_t pid; /* the process whose runtime this is (set at start, and in followed children) */
    size_t session_interval; /* of the running session (cfg's is the next one's) */
    unsigned seq;            /* next file number */
    pthread_t reporter;
    _Atomic pid_t reporter_tid; /* its kernel thread id (rt_fatal.c names it) */
    bool have_reporter;
    sem_t wake;
    atomic_bool stop_req;
    atomic_bool report_req;
    atomic_int fatal_sig;     /* a fatal signal waits for its report */
    atomic_uint reports_done; /* bumped after every report attempt */
    bool files;               /* reports are written (out) */
    bool coll_upload;         /* reports are uploaded by the collector (rt_collector.h) */
    int coll_symbolize;       /* how reports written without the collector are named
                                 (an mp_prof_symbolize; -1: as the others) */
    bool self_named;          /* ... and it is so from now on */
    bool told_fork;           /* said why forked children are not profiled */
    int64_t window_from_ns;   /* `from` of the next report's window (wall clock) */
    bool ending;              /* the session's last report is being taken (lock) */
};

extern struct mpt_rt mpt_rt;

/* Messages on stderr, unless MIMPROF_QUIET; errors (a report not
 * written, a malformed value) whatever MIMPROF_QUIET says. */
#define say(...)       mpt_rt_say(mpt_rt.quiet, __VA_ARGS__)
#define say_error(...) mpt_rt_say(false, __VA_ARGS__)

/* ---- rt_report.c ------------------------------------------------------ */

/* The wall clock (CLOCK_REALTIME) in nanoseconds. */
int64_t mpt_rt_now_ns(void);

/* What a report is, besides its bytes: its file number and its window. */
typedef struct {
    unsigned seq;
    int64_t from_ns, to_ns; /* wall clock: its alloc_* values cover [from, to) */
    bool final;             /* the session's last report */
    int conn;               /* a connection to the collector made for it, or -1 */
} mpt_rt_window;

/* A report of the process's series (see rt_report.c); report_lock held. */
mp_prof_status mpt_rt_take_report_locked(const char *note, uint8_t **buf, size_t *len, uint8_t **pk,
                                         size_t *pklen, mpt_rt_window *w);

/* Writes a report (and its window's peak) as file number w->seq: through
 * the collector when there is one (rt_collector.h). true: the collector
 * writes the file (later, in its own time). */
bool mpt_rt_write_report(const uint8_t *buf, size_t len, const uint8_t *pk, size_t pklen,
                         const mpt_rt_window *w);

/* Takes one report and writes it (the reporter, or the exit path). */
void mpt_rt_report_once(const char *note);

/* The reporter thread. */
void *mpt_rt_reporter_main(void *arg);

/* ---- rt_fatal.c ------------------------------------------------------- */

/* SIGUSR2 and the fatal signals (at the first session). */
void mpt_rt_install_handlers(void);

/* ---- preload_runtime.c ------------------------------------------------ */

/* Starts the session and the reporter in this process; lock held. 0 or -1. */
int mpt_rt_start_locked(void);

/* Ends the session (its last report written); lock held. */
void mpt_rt_end_session_locked(bool at_exit);

/* At exit: one line on the message descriptor (unless quiet) when the
 * session took no sample while the process's peak RSS reached 32 MiB
 * and 8 sampling intervals: its allocations bypassed malloc
 * (rt_unsampled.c says why that is the test). */
void mpt_rt_say_if_unsampled(uint64_t samples_taken);

/* ---- rt_control.c ----------------------------------------------------- */

/* Opens the control (MIMPROF_CTL, MIMPROF_HTTP) into mpt_rt.control; lock
 * held. 0, or -1 (neither served; stderr said why). */
int mpt_rt_open_control(bool ctl, const char *http, const mp_prof_control_host *host);

/* Closes it (atexit). */
void mpt_rt_close_control(void);

#endif
