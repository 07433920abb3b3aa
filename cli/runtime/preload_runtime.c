/* SPDX-License-Identifier: MIT */
/* The preload runtime's lifecycle: environment -> configuration, the
 * session's start and end, fork and exec, exit (see preload_runtime.h
 * for the contract, rt_state.h for its pieces: reports and the reporter
 * thread, signals, the control's hooks). Its helpers: rt_env.c (the
 * environment), rt_output.c (report files), rt_pyro.c (uploads),
 * rt_signals.c (the program's dispositions), rt_fds.c and rt_common.c
 * (descriptors, messages).
 *
 * The Pyroscope agent (a sink of libmimprof-pyroscope, dlopen()ed) is
 * used by the threads that take reports, under report_lock: started at
 * the first report, fed by every report, stopped after the last one.
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
#include "rt_collector.h"
#include "rt_common.h"
#include "rt_ctlhost.h"
#include "rt_env.h"
#include "rt_output.h"
#include "rt_peak.h"
#include "rt_pyro.h"
#include "rt_signals.h"
#include "rt_state.h"
#include "rt_stats.h"
#include "rt_watch.h"

struct mpt_rt mpt_rt = {.lock = PTHREAD_MUTEX_INITIALIZER,
                        .report_lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- session lifecycle ----------------------------------------------- */

static void after_fork_child(void);

/* Starts the session and the reporter in this process; mpt_rt.lock held. */
int mpt_rt_start_locked(void)
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
    unsigned seq = mpt_rt.out.dir[0] != '\0' && !mpt_rt.bare
                       ? mpt_rt_first_free_seq(mpt_rt.out.dir, pid, ".pb.gz")
                       : 0;
    mpt_rt_image_prepare();
    mp_prof_status st = mp_profiler_start(&mpt_rt.cfg, &mpt_rt.prof);
    if (st != MP_PROF_OK) {
        mp_preload_set_sampling(false); /* nothing was tracked */
        say("mimprof: profiling not started in pid %ld: %s\n", (long)pid, mp_prof_strerror(st));
        return -1;
    }
    mpt_rt_stats_attach(mpt_rt.prof);
    mpt_rt.pid = pid;
    mpt_rt.seq = seq;
    mpt_rt.session_interval = mpt_rt.cfg.sample_interval_bytes;
    if (mpt_rt.http) {
        pthread_mutex_lock(&mpt_rt.report_lock);
        mp_prof_control_session_started(mpt_rt.control); /* Go's alloc_*: since the start */
        pthread_mutex_unlock(&mpt_rt.report_lock);
    }
    mpt_rt.window_from_ns = mpt_rt_now_ns();
    atomic_store(&mpt_rt.stop_req, false);
    atomic_store(&mpt_rt.report_req, false);
    atomic_store(&mpt_rt.fatal_sig, 0);
    mpt_rt.started = true;
    mpt_rt_image_start(mpt_rt.prof);
    mpt_watch_start();
    if (mpt_rt.bare)
        return 0; /* one report, at exit */
    mpt_rt_install_handlers();
    /* Born with every signal blocked: no process-directed signal is ever
     * delivered to it, not even before it could block them itself. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    mpt_rt.have_reporter = pthread_create(&mpt_rt.reporter, NULL, mpt_rt_reporter_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!mpt_rt.have_reporter)
        say("mimprof: no reporter thread in pid %ld: only the final report will be written\n",
            (long)mpt_rt.pid);
    return 0;
}

static void after_fork_child(void)
{
    /* The core ended the parent's session in this child; the reporter
     * thread does not exist here. */
    pthread_mutex_init(&mpt_rt.lock, NULL);
    pthread_mutex_init(&mpt_rt.report_lock, NULL);
    mpt_sig_after_fork();
    mpt_rt.reports = 0;
    mpt_rt.last_report_ns = 0;
    /* Children do not serve the HTTP port, and the parent's cumulative
     * profile may have been mid-merge on its control thread. */
    mpt_rt.http = false;
    /* A child whose files would have its parent's names is not profiled
     * (fork_parent said so). */
    bool follow = mpt_rt.follow_fork && (!mpt_rt.files || mpt_rt.out.per_process);
    bool was_started = mpt_rt.started;
    mpt_coll_after_fork();
    if (mpt_rt_pyro_on() && (was_started || mpt_rt.dormant))
        mpt_rt_pyro_after_fork();
    if (was_started) {
        mpt_rt.started = false;
        mpt_rt.have_reporter = false;
        mp_profiler_free(mpt_rt.prof); /* inactive in the child: only releases the handle */
        mpt_rt.prof = NULL;
        sem_destroy(&mpt_rt.wake);
        sem_init(&mpt_rt.wake, 0, 0);
        atomic_store(&mpt_rt.reports_done, 0);
        mpt_rt_image_after_fork();
        /* A followed child's session reports the sampled blocks it
         * inherited as in-use (profiling.h, "fork()"); others let go. */
        if (!follow || mpt_rt_start_locked() != 0)
            mp_profiler_drop_inherited();
    } else if (follow && mpt_rt.dormant) {
        mpt_rt.pid = getpid(); /* a dormant child of a dormant parent */
    }
    /* The control's own fork handler runs after this one (registered
     * later) and asks fork_child: its thread then finds the child's state. */
    mpt_rt.ctl_child_serves = follow && (was_started || mpt_rt.dormant);
    /* The collector waits for a child that profiles itself, and hosts
     * its control socket as it did the parent's. */
    if (mpt_coll_on())
        mpt_ctlhost_after_fork(mpt_rt.ctl_child_serves, mpt_rt.ctl_child_serves);
}

/* In the parent, after its first fork: when its children's reports would
 * replace its own (no %p in the file names), one line says that they are
 * not profiled. */
static void after_fork_parent(void)
{
    if (mpt_rt.started && mpt_rt.follow_fork && mpt_rt.files && !mpt_rt.out.per_process &&
        !mpt_rt.told_fork) {
        mpt_rt.told_fork = true;
        say("mimprof: %s has no %%p: forked children are not profiled (their reports would "
            "replace this process's)\n",
            mpt_rt.out.pattern);
    }
}

/* The envp the dynamic loader passed to constructors: the process's
 * initial environment, read before the program can change it. */
static char *const *g_envp;

/* The configuration from the environment (rt_env.h); mpt_rt.lock held. 0:
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
    mpt_rt.dormant = mpt_env_flag(MPT_ENV_DORMANT, false);
    mpt_rt.bare = !every->set && !pyro && !mpt_rt.dormant;
    mp_prof_config_init(&mpt_rt.cfg);
    if (mpt_env(MPT_ENV_INTERVAL)->set)
        mpt_rt.cfg.sample_interval_bytes = (size_t)mpt_env(MPT_ENV_INTERVAL)->num;
    if (mpt_env(MPT_ENV_SEED)->set)
        mpt_rt.cfg.seed = mpt_env(MPT_ENV_SEED)->num;
    if (mpt_env(MPT_ENV_STACK_DEPTH)->set)
        mpt_rt.cfg.max_stack_depth = (unsigned)mpt_env(MPT_ENV_STACK_DEPTH)->num;
    if (mpt_env(MPT_ENV_SYMBOLIZE)->set)
        mpt_rt.cfg.symbolize = (mp_prof_symbolize)mpt_env(MPT_ENV_SYMBOLIZE)->num;
    mpt_rt.coll_symbolize = mpt_env(MPT_ENV_COLLECTOR_SYMBOLIZE)->set
                                ? (int)mpt_env(MPT_ENV_COLLECTOR_SYMBOLIZE)->num
                                : -1;
    /* The frames reports drop from the leaf end of their stacks: the
     * allocator's entry points unless told otherwise (the library's
     * default needs no call). */
    const mpt_env_value *drop = mpt_env(MPT_ENV_DROP_FRAMES);
    bool keep = mpt_env_flag(MPT_ENV_KEEP_ALLOC_FRAMES, false);
    if ((drop->set || keep) &&
        mp_prof_set_drop_frames(drop->text, keep ? MP_PROF_DROP_NOTHING : MP_PROF_DROP_ALLOCATOR) !=
            MP_PROF_OK) {
        say_error("mimprof: MIMPROF_DROP_FRAMES=%s is not a regular expression; profiling "
                  "disabled\n",
                  drop->text);
        return -1;
    }
    /* The period: MIMPROF_EVERY; a bare preload that uploads reports at
     * the upload interval (a malformed one is refused by mpt_rt_pyro_setup). */
    const mpt_env_value *ui = mpt_env(MPT_ENV_PYRO_UPLOAD_INTERVAL);
    mpt_rt.every_ms = every->set                ? every->num
                      : ui->set && ui->num > 0  ? ui->num
                      : mpt_rt.dormant && !pyro ? 0
                                                : 10000;
    mpt_rt.follow_fork = mpt_env_flag(MPT_ENV_FOLLOW_FORK, true);
    if (mpt_rt_image_configure(mpt_rt.quiet) != 0) /* MIMPROF_IMAGE* (image_runtime.h) */
        return -1;
    if (mpt_watch_configure(mpt_rt.quiet, !mpt_rt.bare) !=
        0) /* MIMPROF_REPORT_ABOVE (rt_watch.h) */
        return -1;
    /* Files: MIMPROF_OUTPUT; when uploading, only when it asks for them. */
    const char *output = mpt_env(MPT_ENV_OUTPUT)->text;
    mpt_rt.files = !pyro || output != NULL;
    char err[600];
    if (mpt_rt.files &&
        mpt_out_configure(&mpt_rt.out, output, every->set ? "mimprof-out/" : "mimprof.%p.pb",
                          mpt_rt.bare ? "mimprof.%p.pb" : "heap.%p.%n.pb.gz", err,
                          sizeof err) != 0) {
        say_error("mimprof: %s; profiling disabled\n", err);
        return -1;
    }
    /* Uploads: without them (a message said why) the runtime goes on with
     * its files, or leaves the process unprofiled when it writes none. */
    /* Under `mimprof run`'s collector, it uploads the whole tree's reports
     * (one profile per window: collector_pyro.c) and this process loads
     * no adapter. */
    mpt_rt.coll_upload = pyro && mpt_coll_on();
    if (pyro && !mpt_rt.coll_upload && mpt_rt_pyro_setup(mpt_rt.quiet) < 0 && !mpt_rt.files)
        return -1;
    return 0;
}

/* Whether the process will keep descriptors of its own open: without a
 * collector (messages, reports, uploads), or when it names its frames
 * itself (the symbolizer keeps the objects open) or serves HTTP. */
static bool keeps_descriptors(bool coll)
{
    const mpt_env_value *sym = mpt_env(MPT_ENV_SYMBOLIZE);
    return !coll || !sym->set || sym->num != MP_PROF_SYMBOLIZE_NONE ||
           mpt_env(MPT_ENV_HTTP)->text != NULL || mpt_env(MPT_ENV_REPORT_ABOVE)->set;
}

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
    pthread_mutex_lock(&mpt_rt.lock);
    if (once) {
        pthread_mutex_unlock(&mpt_rt.lock);
        return result;
    }
    once = true;
    int rc = -1;
    /* The table is read first, whatever else fails: MIMPROF_QUIET and
     * the per-process decision need it. */
    const char *why = "";
    mpt_env_var bad = mpt_env_load(g_envp, &why);
    mpt_rt.quiet = mpt_env_flag(MPT_ENV_QUIET, false);
    if (mpt_env(MPT_ENV_STATUS_DIR)->set && mpt_env(MPT_ENV_STATUS_DIR)->text[0] == '/')
        mpt_rt_pyro_set_status_dir(mpt_env(MPT_ENV_STATUS_DIR)->text);
    bool coll = mpt_coll_init(mpt_env(MPT_ENV_COLLECTOR)->text);
    if (!this_process_is_profiled()) {
        if (!mpt_env_flag(MPT_ENV_DISABLE, false)) { /* an exec not followed: counted */
            mpt_rt_note_unprofiled(mpt_env(MPT_ENV_STATUS_DIR)->text);
            if (coll)
                mpt_coll_bye(); /* the collector need not wait for it */
        }
        rc = 0;
        goto out; /* and no descriptor of ours in this process */
    }
    /* Under the collector a process keeps no descriptor of its own
     * (rt_collector.h, rt_ctlhost.h) unless it names its own frames or
     * serves HTTP; else, with no room out of the program's numbers, it
     * steps aside. */
    if (keeps_descriptors(coll) && !mpt_rt_fds_room(mpt_rt.quiet)) {
        rc = 0;
        goto out;
    }
    /* Under a collector, messages go to it, and no duplicate of stderr
     * is held (a daemon would keep the caller's terminal or pipe open
     * with it): rt_collector.h. */
    mpt_rt_msg_init(!coll); /* before any message */
    if (configure(bad, why) != 0)
        goto out;
    sem_init(&mpt_rt.wake, 0, 0);
    mpt_rt.pid = getpid();
    if (!mpt_rt.dormant && mpt_rt_start_locked() != 0)
        goto out;
    pthread_atfork(NULL, after_fork_parent, after_fork_child);
    atexit(mpt_rt_stop);
    /* After the atexit above, so that at exit the control thread stops
     * first. */
    bool ctl = mpt_env_flag(MPT_ENV_CTL, true);
    const char *http = mpt_env(MPT_ENV_HTTP)->text;
    /* Hello to the collector: it waits for this process, and hosts its
     * control socket when that is all the control serves. */
    const mp_prof_control_host *host =
        coll ? mpt_ctlhost_hello(!mpt_rt.bare && ctl && http == NULL, true) : NULL;
    if (coll && host == NULL && http == NULL && !mp_prof_fd_room())
        ctl = false; /* a socket of its own would take a number of the program's */
    if (!mpt_rt.bare && (ctl || http != NULL) && mpt_rt_open_control(ctl, http, host) == 0) {
        atexit(mpt_rt_close_control);
        if (mp_prof_control_http_address(mpt_rt.control) != NULL) {
            pthread_mutex_lock(&mpt_rt.report_lock);
            mpt_rt.http = true;
            if (mpt_rt.started) /* the session started before the endpoint */
                mp_prof_control_session_started(mpt_rt.control);
            pthread_mutex_unlock(&mpt_rt.report_lock);
        }
    }
    rc = 1;
out:
    result = rc;
    pthread_mutex_unlock(&mpt_rt.lock);
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
 * the exit image when `at_exit`), the last report written; mpt_rt.lock held. */
void mpt_rt_end_session_locked(bool at_exit)
{
    if (mpt_rt.have_reporter) {
        atomic_store(&mpt_rt.stop_req, true);
        sem_post(&mpt_rt.wake);
        pthread_join(mpt_rt.reporter, NULL);
        mpt_rt.have_reporter = false;
    }
    mpt_rt_image_stop(at_exit); /* the exit image first: it still holds the interval */
    mpt_rt.ending = true;
    mpt_rt_report_once(NULL);
    if (at_exit) {
        mp_prof_stats st;
        mp_prof_diagnostics(&st);
        mpt_rt_say_if_unsampled(st.samples_taken);
    }
    mpt_rt.ending = false;
    mpt_rt.started = false;
    mp_profiler_free(mpt_rt.prof);
    mpt_rt.prof = NULL;
}

void mpt_rt_stop(void)
{
    pthread_mutex_lock(&mpt_rt.lock);
    if (mpt_rt.pid != getpid()) { /* not this process's runtime (an unfollowed child) */
        pthread_mutex_unlock(&mpt_rt.lock);
        return;
    }
    if (mpt_rt.started)
        mpt_rt_end_session_locked(true);
    mpt_rt_pyro_finish();
    pthread_mutex_unlock(&mpt_rt.lock);
}
