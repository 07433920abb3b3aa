/* SPDX-License-Identifier: MIT */
/* The preload runtime: environment -> session, the reporter thread and
 * its signals, fork and exec (see preload_runtime.h for the contract).
 * Its helpers: rt_env.c (the environment), rt_output.c (report files),
 * rt_pyro.c (uploads), rt_signals.c (the program's dispositions),
 * rt_fds.c and rt_common.c (descriptors, messages).
 *
 * Threads: the reporter thread is the only one that calls
 * mp_profiler_report() (and, at the end, the thread running exit handlers,
 * after it has joined the reporter). Signal handlers only post a
 * semaphore and set atomic flags. The Pyroscope agent (a sink of
 * libmimprof-pyroscope, dlopen()ed) is used by the same threads, in the
 * same order: started at the first report, fed by every report, stopped
 * after the last one.
 */
#define _GNU_SOURCE
#include "preload_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

#include "image_runtime.h"
#include "rt_common.h"
#include "rt_env.h"
#include "rt_output.h"
#include "rt_peak.h"
#include "rt_pyro.h"
#include "rt_signals.h"
#include "rt_stats.h"
#include "rt_watch.h"

/* Fatal signals whose default action ends the process: a last report is
 * attempted when the program did not set a handler of its own. */
static const int FATAL_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                                    SIGSEGV, SIGBUS, SIGFPE, SIGILL};
enum { NFATAL = sizeof FATAL_SIGNALS / sizeof FATAL_SIGNALS[0] };

static struct {
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
     * socket's); inside rt.lock when both are held. */
    pthread_mutex_t report_lock;
    unsigned reports;       /* reports taken by this process (report_lock) */
    int64_t last_report_ns; /* wall clock of the last one, 0: none (report_lock) */
    uint64_t every_ms;
    bool follow_fork;
    bool quiet;
    pid_t pid; /* the process whose runtime this is (set at start, and in followed children) */
    size_t session_interval; /* of the running session (rt.cfg's is the next one's) */
    unsigned seq;            /* next file number */
    pthread_t reporter;
    bool have_reporter;
    sem_t wake;
    atomic_bool stop_req;
    atomic_bool report_req;
    atomic_int fatal_sig;     /* a fatal signal waits for its report */
    atomic_uint reports_done; /* bumped after every report attempt */
    bool files;               /* reports are written (rt.out) */
    bool told_fork;           /* said why forked children are not profiled */
    int64_t window_from_ns;   /* `from` of the next report's window (wall clock) */
} rt = {.lock = PTHREAD_MUTEX_INITIALIZER, .report_lock = PTHREAD_MUTEX_INITIALIZER};

/* Messages on stderr, unless MIMPROF_QUIET; errors (a report not
 * written, a malformed value) whatever MIMPROF_QUIET says. */
#define say(...)       mpt_rt_say(rt.quiet, __VA_ARGS__)
#define say_error(...) mpt_rt_say(false, __VA_ARGS__)

/* ---- reports --------------------------------------------------------- */

static int64_t now_real_ns(void)
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
    if (rt.out.dir[0] == '\0' || mpt_peak_name(path, peak_path, sizeof peak_path) != 0)
        return;
    if (mpt_out_write(peak_path, pk, pklen, rt.out.gzip, why, sizeof why) != 0)
        say_error("mimprof: %s; peak profile not written\n", why);
}

/* A report of the process's series, whoever asked for it (with the
 * comment `note`, when not NULL: why it is written), and the window's
 * peak (*pk NULL when there is none): both handed to the Pyroscope agent
 * when uploading; the report merged into the HTTP endpoint's cumulative
 * profile when it is served; *seq is its file number. report_lock held. */
static mp_prof_status take_report_locked(const char *note, uint8_t **buf, size_t *len, uint8_t **pk,
                                         size_t *pklen, unsigned *seq)
{
    *pk = NULL;
    *pklen = 0;
    if (note != NULL)
        (void)mp_profiler_annotate(rt.prof, note);
    mp_prof_status st = mp_profiler_report(rt.prof, buf, len);
    if (st != MP_PROF_OK)
        return st;
    if (mp_profiler_report_peak(rt.prof, pk, pklen, NULL) != MP_PROF_OK) {
        *pk = NULL;
        *pklen = 0;
    }
    /* Windows are contiguous: each report's interval values (alloc_*)
     * cover exactly [previous report, now). */
    int64_t now = now_real_ns();
    if (mpt_rt_pyro_on()) {
        mpt_rt_pyro_submit(*buf, *len, rt.window_from_ns, now, false);
        if (*pk != NULL)
            mpt_rt_pyro_submit(*pk, *pklen, rt.window_from_ns, now, true);
    }
    if (rt.http)
        (void)mp_prof_control_feed(rt.control, *buf, *len);
    rt.window_from_ns = now;
    rt.reports++;
    rt.last_report_ns = now;
    *seq = rt.seq++;
    return MP_PROF_OK;
}

/* Writes report `seq` (and its peak, when there is one) to the output,
 * when reports are written (see expand_path). */
static void write_report(const uint8_t *buf, size_t len, const uint8_t *pk, size_t pklen,
                         unsigned seq)
{
    if (!rt.files)
        return;
    char path[4200], why[600];
    if (mpt_out_name(&rt.out, rt.pid, seq, path, sizeof path) != 0)
        say_error("mimprof: report path too long\n");
    else if (mpt_out_write(path, buf, len, rt.out.gzip, why, sizeof why) != 0)
        say_error("mimprof: %s; report not written\n", why);
    else if (pk != NULL)
        write_peak(path, pk, pklen);
}

/* Takes one report and writes it. Called by the reporter thread, or by
 * the exit path after the reporter is gone. */
static void report_once(const char *note)
{
    uint8_t *buf = NULL, *pk = NULL;
    size_t len = 0, pklen = 0;
    unsigned seq = 0;
    pthread_mutex_lock(&rt.report_lock);
    mp_prof_status st = take_report_locked(note, &buf, &len, &pk, &pklen, &seq);
    pthread_mutex_unlock(&rt.report_lock);
    if (st != MP_PROF_OK) {
        say("mimprof: report failed: %s\n", mp_prof_strerror(st));
        return;
    }
    write_report(buf, len, pk, pklen, seq);
    mp_prof_buffer_free(buf);
    mp_prof_buffer_free(pk);
}

/* ---- the reporter thread --------------------------------------------- */

static void *reporter_main(void *arg)
{
    (void)arg;
    /* Signals are for the application's threads; this one only waits.
     * What it allocates (handing reports to the Pyroscope agent, which
     * fits and gzips them here) is the profiler's, not the program's. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    mp_prof_thread_exclude();
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    if (mpt_rt_pyro_on() && rt.every_ms > 0) {
        /* Uploads on wall-clock multiples of the period, like Pyroscope's
         * own agents (the first window is shorter). */
        int64_t now_ms = (int64_t)next.tv_sec * 1000 + next.tv_nsec / 1000000;
        int64_t at = (now_ms / (int64_t)rt.every_ms + 1) * (int64_t)rt.every_ms;
        next.tv_sec = (time_t)(at / 1000);
        next.tv_nsec = (long)(at % 1000) * 1000000L;
    } else {
        mpt_rt_timespec_add_ms(&next, rt.every_ms);
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
            if (rt.every_ms == 0 || poll.tv_sec < next.tv_sec ||
                (poll.tv_sec == next.tv_sec && poll.tv_nsec < next.tv_nsec))
                until = poll;
        }
        int r = mpt_rt_wait(&rt.wake, rt.every_ms > 0 || watching ? &until : NULL);
        if (atomic_load(&rt.stop_req)) {
            /* A report asked for (SIGUSR2) and not taken yet is taken
             * now: the exit that follows a request never drops it. */
            if (atomic_exchange(&rt.report_req, false)) {
                report_once(NULL);
                atomic_fetch_add(&rt.reports_done, 1);
            }
            break;
        }
        bool timed_out = false;
        if (r != 0 && rt.every_ms > 0) { /* the period's deadline, or only a look? */
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
            mpt_rt_timespec_add_ms(&next, rt.every_ms);
            if (now.tv_sec > next.tv_sec) {
                next = now;
                mpt_rt_timespec_add_ms(&next, rt.every_ms);
            }
        }
        bool asked = atomic_exchange(&rt.report_req, false);
        int fatal = atomic_load(&rt.fatal_sig);
        if (!timed_out && !asked && fatal == 0 && !crossed)
            continue; /* a stale post, or a look at the memory */
        report_once(crossed ? above : NULL);
        if (fatal != 0)
            mpt_rt_pyro_finish(); /* the waiting handler gives up after 2 s */
        atomic_fetch_add(&rt.reports_done, 1);
        if (fatal != 0)
            break; /* the process is about to die: no more reports */
    }
    return NULL;
}

void mpt_rt_request(void)
{
    mpt_rt_image_request(); /* MIMPROF_IMAGE: a heap image too (image_runtime.h) */
    atomic_store(&rt.report_req, true);
    sem_post(&rt.wake);
}

static void on_usr2(int sig)
{
    (void)sig;
    int saved = errno;
    mpt_rt_request();
    errno = saved;
}

/* Asks the reporter for a last report and waits for it at most 2 s.
 * Async-signal-safe: a flag, a semaphore post and nanosleep. The reporter
 * may be blocked by a lock the calling thread holds (a crash inside
 * malloc): then the wait times out and the process goes on dying. Not in
 * the reporter itself, not in another process (a vfork child shares this
 * memory). */
static void last_report(int why)
{
    if (!rt.started || !rt.have_reporter || getpid() != rt.pid ||
        pthread_equal(pthread_self(), rt.reporter))
        return;
    unsigned before = atomic_load(&rt.reports_done);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&rt.fatal_sig, &expected, why))
        return;
    sem_post(&rt.wake);
    for (int i = 0; i < 200 && atomic_load(&rt.reports_done) == before; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
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
static void install_handlers(void)
{
    if (rt.handlers)
        return;
    rt.handlers = true;
    mpt_sig_take(SIGUSR2, on_usr2, SA_RESTART);
    for (size_t i = 0; i < NFATAL; i++)
        mpt_sig_take(FATAL_SIGNALS[i], on_fatal, SA_RESETHAND | SA_RESTART);
}

/* ---- session lifecycle ----------------------------------------------- */

static void after_fork_child(void);

/* Starts the session and the reporter in this process; rt.lock held. */
static int start_locked(void)
{
    /* The sampling allocator must have served this process at least once
     * (mp_profiler_start checks it): make sure it has. Through a volatile
     * pointer: compilers may delete a free(malloc(n)) pair. */
    mp_preload_set_sampling(true); /* the dormant object: malloc and free sample */
    void *volatile probe = malloc(1);
    free(probe);
    /* The runtime's own work comes before the session starts: what it
     * allocates (opendir's 32 KiB buffer) is not the program's and must
     * not be sampled into the program's profile. An exec'd program keeps
     * its pid: its files continue the series. */
    pid_t pid = getpid();
    unsigned seq =
        rt.out.dir[0] != '\0' && !rt.bare ? mpt_rt_first_free_seq(rt.out.dir, pid, ".pb.gz") : 0;
    mpt_rt_image_prepare();
    mp_prof_status st = mp_profiler_start(&rt.cfg, &rt.prof);
    if (st != MP_PROF_OK) {
        mp_preload_set_sampling(false); /* nothing was tracked */
        say("mimprof: profiling not started in pid %ld: %s\n", (long)pid, mp_prof_strerror(st));
        return -1;
    }
    mpt_rt_stats_attach(rt.prof);
    rt.pid = pid;
    rt.seq = seq;
    rt.session_interval = rt.cfg.sample_interval_bytes;
    if (rt.http) {
        pthread_mutex_lock(&rt.report_lock);
        mp_prof_control_session_started(rt.control); /* Go's alloc_*: since the start */
        pthread_mutex_unlock(&rt.report_lock);
    }
    rt.window_from_ns = now_real_ns();
    atomic_store(&rt.stop_req, false);
    atomic_store(&rt.report_req, false);
    atomic_store(&rt.fatal_sig, 0);
    rt.started = true;
    mpt_rt_image_start(rt.prof);
    mpt_watch_start();
    if (rt.bare)
        return 0; /* one report, at exit */
    install_handlers();
    /* Born with every signal blocked: no process-directed signal is ever
     * delivered to it, not even before it could block them itself. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rt.have_reporter = pthread_create(&rt.reporter, NULL, reporter_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rt.have_reporter)
        say("mimprof: no reporter thread in pid %ld: only the final report will be written\n",
            (long)rt.pid);
    return 0;
}

static void after_fork_child(void)
{
    /* The core ended the parent's session in this child; the reporter
     * thread does not exist here. */
    pthread_mutex_init(&rt.lock, NULL);
    pthread_mutex_init(&rt.report_lock, NULL);
    mpt_sig_after_fork();
    rt.reports = 0;
    rt.last_report_ns = 0;
    /* Children do not serve the HTTP port, and the parent's cumulative
     * profile may have been mid-merge on its control thread. */
    rt.http = false;
    /* A child whose files would have its parent's names is not profiled
     * (fork_parent said so). */
    bool follow = rt.follow_fork && (!rt.files || rt.out.per_process);
    bool was_started = rt.started;
    if (mpt_rt_pyro_on() && (was_started || rt.dormant))
        mpt_rt_pyro_after_fork();
    if (was_started) {
        rt.started = false;
        rt.have_reporter = false;
        mp_profiler_free(rt.prof); /* inactive in the child: only releases the handle */
        rt.prof = NULL;
        sem_destroy(&rt.wake);
        sem_init(&rt.wake, 0, 0);
        atomic_store(&rt.reports_done, 0);
        mpt_rt_image_after_fork();
        if (follow)
            start_locked();
    } else if (follow && rt.dormant) {
        rt.pid = getpid(); /* a dormant child of a dormant parent */
    }
    /* The control's own fork handler runs after this one (registered
     * later) and asks fork_child: its thread then finds the child's state. */
    rt.ctl_child_serves = follow && (was_started || rt.dormant);
}

/* In the parent, after its first fork: when its children's reports would
 * replace its own (no %p in the file names), one line says that they are
 * not profiled. */
static void after_fork_parent(void)
{
    if (rt.started && rt.follow_fork && rt.files && !rt.out.per_process && !rt.told_fork) {
        rt.told_fork = true;
        say("mimprof: %s has no %%p: forked children are not profiled (their reports would "
            "replace this process's)\n",
            rt.out.pattern);
    }
}

/* The envp the dynamic loader passed to constructors: the process's
 * initial environment, read before the program can change it. */
static char *const *g_envp;

/* The configuration from the environment (rt_env.h); rt.lock held. 0:
 * configured; -1: not profiling (a message said why). */
static int configure(mpt_env_var bad, const char *why)
{
    if (bad != MPT_ENV_COUNT) {
        say_error("mimprof: %s=%s is not %s; profiling disabled\n", mpt_env_table[bad].name,
                  mpt_env(bad)->text, why);
        return -1;
    }
    const mpt_env_value *every = mpt_env(MPT_ENV_EVERY);
    bool pyro = mpt_env(MPT_ENV_PYRO_SERVER)->set;
    /* Dormant: everything is configured and checked now, so that a
     * session asked for later starts or fails at once. */
    rt.dormant = mpt_env_flag(MPT_ENV_DORMANT, false);
    rt.bare = !every->set && !pyro && !rt.dormant;
    mp_prof_config_init(&rt.cfg);
    if (mpt_env(MPT_ENV_INTERVAL)->set)
        rt.cfg.sample_interval_bytes = (size_t)mpt_env(MPT_ENV_INTERVAL)->num;
    if (mpt_env(MPT_ENV_SEED)->set)
        rt.cfg.seed = mpt_env(MPT_ENV_SEED)->num;
    if (mpt_env(MPT_ENV_STACK_DEPTH)->set)
        rt.cfg.max_stack_depth = (unsigned)mpt_env(MPT_ENV_STACK_DEPTH)->num;
    if (mpt_env(MPT_ENV_SYMBOLIZE)->set)
        rt.cfg.symbolize = (mp_prof_symbolize)mpt_env(MPT_ENV_SYMBOLIZE)->num;
    /* The period: MIMPROF_EVERY; a bare preload that uploads reports at
     * the upload interval (a malformed one is refused by mpt_rt_pyro_setup). */
    const mpt_env_value *ui = mpt_env(MPT_ENV_PYRO_UPLOAD_INTERVAL);
    rt.every_ms = every->set               ? every->num
                  : ui->set && ui->num > 0 ? ui->num
                  : rt.dormant && !pyro    ? 0
                                           : 10000;
    rt.follow_fork = mpt_env_flag(MPT_ENV_FOLLOW_FORK, true);
    if (mpt_rt_image_configure(rt.quiet) != 0) /* MIMPROF_IMAGE* (image_runtime.h) */
        return -1;
    if (mpt_watch_configure(rt.quiet, !rt.bare) != 0) /* MIMPROF_REPORT_ABOVE (rt_watch.h) */
        return -1;
    /* Files: MIMPROF_OUTPUT; when uploading, only when it asks for them. */
    const char *output = mpt_env(MPT_ENV_OUTPUT)->text;
    rt.files = !pyro || output != NULL;
    char err[600];
    if (rt.files &&
        mpt_out_configure(&rt.out, output, every->set ? "mimprof-out/" : "mimprof.%p.pb",
                          rt.bare ? "mimprof.%p.pb" : "heap.%p.%n.pb.gz", err, sizeof err) != 0) {
        say_error("mimprof: %s; profiling disabled\n", err);
        return -1;
    }
    /* Uploads: without them (a message said why) the runtime goes on with
     * its files, or leaves the process unprofiled when it writes none. */
    if (pyro && mpt_rt_pyro_setup(rt.quiet) < 0 && !rt.files)
        return -1;
    return 0;
}

/* ---- control (<mimprof/profiling_control.h>) ------------------------- */

static void end_session_locked(bool at_exit);

/* The hooks of the control: status, start, stop and report as this
 * runtime does them (its reporter, files and uploads); run on the
 * control's thread. */
static void ctl_state(void *ctx, mp_prof_control_state *st)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    st->running = rt.started;
    st->interval = rt.started ? rt.session_interval : rt.cfg.sample_interval_bytes;
    st->next_interval = rt.cfg.sample_interval_bytes;
    st->every_ms = rt.every_ms;
    st->report_at_exit = true;
    st->output = rt.files ? (rt.out.dir[0] != '\0' ? rt.out.dir : rt.out.pattern) : "";
    pthread_mutex_lock(&rt.report_lock); /* the agent starts under it (take_report_locked) */
    uint64_t uploaded = 0, lost = 0;
    const char *service = mpt_rt_pyro_progress(&uploaded, &lost);
    if (service[0] != '\0')
        snprintf(st->upload, sizeof st->upload, "on (service_name=%s): %llu uploaded, %llu lost",
                 service, (unsigned long long)uploaded, (unsigned long long)lost);
    st->reports = rt.reports;
    st->last_report_ns = rt.last_report_ns;
    pthread_mutex_unlock(&rt.report_lock);
    pthread_mutex_unlock(&rt.lock);
}

static mp_prof_status ctl_start(void *ctx, uint64_t interval, int64_t every_ms, char *why,
                                size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    mp_prof_status st = MP_PROF_E_BUSY;
    if (rt.started) {
        snprintf(why, whylen, "a session is already running");
    } else {
        if (interval != 0)
            rt.cfg.sample_interval_bytes = (size_t)interval;
        if (every_ms >= 0)
            rt.every_ms = (uint64_t)every_ms;
        st = start_locked() == 0 ? MP_PROF_OK : MP_PROF_E_INTERNAL;
        if (st != MP_PROF_OK)
            snprintf(why, whylen, "the session did not start (see the process's stderr)");
    }
    pthread_mutex_unlock(&rt.lock);
    return st;
}

/* Writes the session's last report (as at exit) and stops it: dormant
 * again. */
static mp_prof_status ctl_stop(void *ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    mp_prof_status st = MP_PROF_E_INACTIVE;
    if (!rt.started) {
        snprintf(why, whylen, "dormant: no session to stop");
    } else {
        end_session_locked(false);
        /* The live table and the free filter are empty now: the dormant
         * object's malloc and free may skip them again. */
        mp_preload_set_sampling(false);
        st = MP_PROF_OK;
    }
    pthread_mutex_unlock(&rt.lock);
    return st;
}

/* `st`, with its reason in `why` when it failed. */
static mp_prof_status why_not(mp_prof_status st, bool started, char *why, size_t whylen)
{
    if (st != MP_PROF_OK)
        snprintf(why, whylen, "%s",
                 started ? mp_prof_strerror(st) : "dormant: start a session first");
    return st;
}

/* A report now: one of the process's series like any other, written to
 * the output (when reports are written) and uploaded (when uploading),
 * so that no window of allocations is lost anywhere, and fed to the
 * control (take_report_locked). */
static mp_prof_status ctl_report(void *ctx, uint8_t **buf, size_t *len, void (*then)(void *),
                                 void *then_ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    mp_prof_status st = MP_PROF_E_INACTIVE;
    unsigned seq = 0;
    if (rt.started) {
        uint8_t *pk = NULL;
        size_t pklen = 0;
        pthread_mutex_lock(&rt.report_lock);
        st = take_report_locked(NULL, buf, len, &pk, &pklen, &seq);
        if (st == MP_PROF_OK && then != NULL)
            then(then_ctx);
        pthread_mutex_unlock(&rt.report_lock);
        if (st == MP_PROF_OK)
            write_report(*buf, *len, pk, pklen, seq);
        mp_prof_buffer_free(pk);
    }
    bool started = rt.started;
    pthread_mutex_unlock(&rt.lock);
    return why_not(st, started, why, whylen);
}

static mp_prof_status ctl_image(void *ctx, const char *path, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    mp_prof_status st = rt.started ? mp_profiler_write_image(rt.prof, path) : MP_PROF_E_INACTIVE;
    bool started = rt.started;
    pthread_mutex_unlock(&rt.lock);
    return why_not(st, started, why, whylen);
}

static void ctl_set_interval(void *ctx, uint64_t interval)
{
    (void)ctx;
    pthread_mutex_lock(&rt.lock);
    rt.cfg.sample_interval_bytes = (size_t)interval;
    pthread_mutex_unlock(&rt.lock);
}

/* after_fork_child decided it (it runs first). */
static bool ctl_fork_child(void *ctx)
{
    (void)ctx;
    return rt.ctl_child_serves;
}

static void ctl_log(void *ctx, const char *line)
{
    (void)ctx;
    say_error("%s", line);
}

static const mp_prof_control_hooks CTL_HOOKS = {
    .state = ctl_state,
    .start = ctl_start,
    .stop = ctl_stop,
    .report = ctl_report,
    .image = ctl_image,
    .set_interval = ctl_set_interval,
    .fork_child = ctl_fork_child,
    .log = ctl_log,
};

/* Opens the control (MIMPROF_CTL, MIMPROF_HTTP); rt.lock held. One that
 * cannot be served is said on stderr and the other one is served alone.
 * 0, or -1 (neither). */
static int open_control(bool ctl, const char *http)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.ctl = ctl;
    o.http = http;
    o.http_wildcard = mpt_env_flag(MPT_ENV_HTTP_WILDCARD, false);
    o.quiet = rt.quiet;
    char why[600];
    while (mp_prof_control_open(&o, &CTL_HOOKS, &rt.control, why, sizeof why) != MP_PROF_OK) {
        rt.control = NULL;
        bool http_failed = strncmp(why, "http: ", 6) == 0;
        if (http_failed)
            say_error("mimprof: %s; not serving /debug/pprof\n", why);
        else
            say("mimprof: %s\n", why);
        if (http_failed && o.ctl)
            o.http = NULL; /* the control socket alone */
        else if (!http_failed && o.ctl && o.http != NULL && strncmp(why, "ctl: ", 5) == 0)
            o.ctl = false; /* /debug/pprof alone */
        else
            return -1;
    }
    return 0;
}

static void close_control(void) { mp_prof_control_close(rt.control); }

/* Whether this process profiles itself. MIMPROF_ROOT_PID (set by
 * `mimprof run`) names the process it started: that process, also after
 * an exec that replaced it (same pid), is profiled; a program executed by
 * any other process (a child that forked and executed) only with
 * MIMPROF_FOLLOW_EXEC=1. Without MIMPROF_ROOT_PID (a bare preload) every
 * process that loads the preload profiles itself. Forked children that do
 * not exec are after_fork_child's. */
static bool this_process_is_profiled(void)
{
    if (mpt_env_flag(MPT_ENV_DISABLE, false))
        return false;
    const mpt_env_value *root = mpt_env(MPT_ENV_ROOT_PID);
    return !root->set || (pid_t)root->num == getpid() || mpt_env_flag(MPT_ENV_FOLLOW_EXEC, true);
}

int mpt_rt_start(void)
{
    static bool once;
    static int result;
    pthread_mutex_lock(&rt.lock);
    if (once) {
        pthread_mutex_unlock(&rt.lock);
        return result;
    }
    once = true;
    int rc = -1;
    /* The table is read first, whatever else fails: MIMPROF_QUIET and
     * the per-process decision need it. */
    const char *why = "";
    mpt_env_var bad = mpt_env_load(g_envp, &why);
    rt.quiet = mpt_env_flag(MPT_ENV_QUIET, false);
    if (mpt_env(MPT_ENV_STATUS_DIR)->set && mpt_env(MPT_ENV_STATUS_DIR)->text[0] == '/')
        mpt_rt_pyro_set_status_dir(mpt_env(MPT_ENV_STATUS_DIR)->text);
    if (!this_process_is_profiled()) {
        rc = 0;
        goto out; /* and no descriptor of ours in this process */
    }
    mpt_rt_msg_init(); /* before any message */
    if (configure(bad, why) != 0)
        goto out;
    sem_init(&rt.wake, 0, 0);
    rt.pid = getpid();
    if (!rt.dormant && start_locked() != 0)
        goto out;
    pthread_atfork(NULL, after_fork_parent, after_fork_child);
    atexit(mpt_rt_stop);
    /* After the atexit above, so that at exit the control thread stops
     * first. */
    bool ctl = mpt_env_flag(MPT_ENV_CTL, true);
    const char *http = mpt_env(MPT_ENV_HTTP)->text;
    if (!rt.bare && (ctl || http != NULL) && open_control(ctl, http) == 0) {
        atexit(close_control);
        if (mp_prof_control_http_address(rt.control) != NULL) {
            pthread_mutex_lock(&rt.report_lock);
            rt.http = true;
            if (rt.started) /* the session started before the endpoint */
                mp_prof_control_session_started(rt.control);
            pthread_mutex_unlock(&rt.report_lock);
        }
    }
    rc = 1;
out:
    result = rc;
    pthread_mutex_unlock(&rt.lock);
    return rc;
}

/* Before the preload's own constructor (default priority): see the
 * header. */
__attribute__((constructor(102))) static void runtime_ctor(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    g_envp = envp;
    mpt_rt_start();
}

/* Ends the session: the reporter joined, the image thread stopped (with
 * the exit image when `at_exit`), the last report written; rt.lock held. */
static void end_session_locked(bool at_exit)
{
    if (rt.have_reporter) {
        atomic_store(&rt.stop_req, true);
        sem_post(&rt.wake);
        pthread_join(rt.reporter, NULL);
        rt.have_reporter = false;
    }
    mpt_rt_image_stop(at_exit); /* the exit image first: it still holds the interval */
    report_once(NULL);
    rt.started = false;
    mp_profiler_free(rt.prof);
    rt.prof = NULL;
}

void mpt_rt_stop(void)
{
    pthread_mutex_lock(&rt.lock);
    if (rt.pid != getpid()) { /* not this process's runtime (an unfollowed child) */
        pthread_mutex_unlock(&rt.lock);
        return;
    }
    if (rt.started)
        end_session_locked(true);
    mpt_rt_pyro_finish();
    pthread_mutex_unlock(&rt.lock);
}
