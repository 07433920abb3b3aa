/* SPDX-License-Identifier: MIT */
/* Runs the command of `mimprof run` as its child, with the preload.
 *
 * mimprof waits for the child, forwards SIGTERM, SIGHUP, SIGUSR1, SIGUSR2
 * (and SIGINT / SIGQUIT when sent by kill(); a terminal already sends those
 * to the whole process group) and exits with its status: the command's
 * exit code; 128 + N when signal N killed it (reported on stderr, like a
 * shell); 127 when it cannot be run (not found, not executable: the reason
 * on stderr); 125 for mimprof's own errors (bad option, no preload object,
 * unusable output directory).
 *
 * What the preload does with the environment set here is the contract in
 * preload_runtime.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "run.h"

static volatile sig_atomic_t g_child = 0;
/* The collector, while `mimprof run` waits for it after the program
 * ended (its exit uploads, up to MIMPROF_PYROSCOPE_EXIT_DEADLINE): a
 * SIGTERM or SIGINT then ends that wait, as the user asks. */
static volatile sig_atomic_t g_collector = 0;

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* SIGINT/SIGQUIT from the terminal reach the child directly. */
    if ((sig == SIGINT || sig == SIGQUIT) && si != NULL && si->si_code != SI_USER &&
        si->si_code != SI_QUEUE)
        return;
    if (g_child > 0)
        kill((pid_t)g_child, sig);
    else if (g_collector > 0 && (sig == SIGTERM || sig == SIGINT))
        kill((pid_t)g_collector, SIGTERM);
}

int mpt_run_command(run_opts *op, char **cmd)
{
    run_opts o = *op; /* (its secrets stay in *op's buffers) */
    char preload[PATH_MAX], looked[4096], object[64];
    mpt_run_pick_allocator(&o, cmd[0]);
    /* --dormant: the object whose malloc and free stay the provider's own
     * until a session starts (preload/preload.c). */
    snprintf(object, sizeof object, "%s%s", o.allocator, o.dormant ? "-dormant" : "");
    if (mpt_run_find_preload(object, preload, sizeof preload, looked, sizeof looked) != 0) {
        fprintf(stderr,
                "mimprof run: cannot find libmimprof-preload-%s.so (looked in: %s; "
                "set MIMPROF_PRELOAD_DIR, or build with the %s provider)\n",
                object, looked, o.allocator);
        return EXIT_OWN_ERROR;
    }
    const char *server = getenv("PYROSCOPE_SERVER_ADDRESS");
    o.pyro = o.pyro_url != NULL || (server != NULL && server[0] != '\0');
    if (!o.pyro && (o.pyro_app != NULL || o.pyro_ntags > 0 || o.pyro_tenant != NULL ||
                    o.pyro_instance != NULL || o.pyro_basic != NULL || o.pyro_bearer != NULL ||
                    o.pyro_protocol != NULL)) {
        fprintf(stderr,
                "mimprof run: --app, --tag, --instance, --tenant, --basic-auth, --bearer-token and "
                "--pyroscope-protocol need --pyroscope URL (or PYROSCOPE_SERVER_ADDRESS)\n");
        return EXIT_OWN_ERROR;
    }
    if (o.pyro_basic != NULL && o.pyro_bearer != NULL) {
        fprintf(stderr, "mimprof run: --basic-auth and --bearer-token exclude each other\n");
        return EXIT_OWN_ERROR;
    }
    if (o.pyro && mpt_run_setup_pyroscope(&o, preload) != 0)
        return EXIT_OWN_ERROR;
    /* Uploading: files only with -o. */
    bool files = !o.pyro || o.out_given;
    char abs_dir[PATH_MAX];
    if (files && (mpt_mkdir_dir(o.out_dir) != 0 || realpath(o.out_dir, abs_dir) == NULL ||
                  mpt_dir_writable(abs_dir) != 0)) {
        fprintf(stderr, "mimprof run: cannot use output directory %s: %s\n", o.out_dir,
                strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (mpt_run_build_env(&o, preload, files ? abs_dir : NULL) != 0) {
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (mpt_run_image_env(&o) != 0)
        return EXIT_OWN_ERROR;

    /* The collector (collector.h): the reports and messages of the whole
     * process tree; without it (--no-collector, or it cannot start) each
     * process writes its own, as the bare preload does. */
    mpt_run_coll coll = {
        .notify = -1, .ctl = -1, .pid = 0, .sock = -1, .pipe_out = -1, .pipe_in = -1};
    if (!o.no_collector && mpt_run_collector_start(&o, files ? abs_dir : NULL, &coll) != 0)
        fprintf(stderr, "mimprof run: no collector (%s): each process writes its own reports\n",
                strerror(errno));
    char status_dir[4096];
    mpt_run_status_dir_make(status_dir, sizeof status_dir);
    /* exec failures travel back through a close-on-exec pipe. */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        mpt_run_collector_end(&coll);
        mpt_run_status_dir_print(status_dir);
        fprintf(stderr, "mimprof run: pipe: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    /* Signals: set up before the fork so none is missed; the child
     * restores the defaults before exec. */
    static const int fwd[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa, saved[sizeof fwd / sizeof fwd[0]];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigset_t block, oldmask;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&block, fwd[i]);
    sigprocmask(SIG_BLOCK, &block, &oldmask);
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaction(fwd[i], &sa, &saved[i]);
    time_t started = time(NULL);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        mpt_run_collector_end(&coll);
        mpt_run_status_dir_print(status_dir);
        fprintf(stderr, "mimprof run: fork: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (pid == 0) {
        for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
            sigaction(fwd[i], &saved[i], NULL);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        close(pfd[0]);
        /* The process the runtime profiles: this one, also once an exec
         * replaced it; programs other processes execute are governed by
         * MIMPROF_FOLLOW_EXEC (runtime/rt_env.h). */
        char root[32];
        snprintf(root, sizeof root, "%ld", (long)getpid());
        if (setenv("MIMPROF_ROOT_PID", root, 1) != 0)
            _exit(EXIT_OWN_ERROR);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(EXIT_CANNOT_RUN);
    }
    g_child = pid;
    if (mpt_run_collector_spawn(&coll) != 0)
        fprintf(stderr,
                "mimprof run: no collector (fork: %s): each process writes its own "
                "reports\n",
                strerror(errno));
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    close(pfd[1]);
    int exec_errno = 0;
    ssize_t r;
    while ((r = read(pfd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    int status;
    if (mpt_run_collector_wait(&coll, pid, &status) != 0) {
        fprintf(stderr, "mimprof run: waitpid: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    g_collector = coll.pid;
    g_child = 0;
    mpt_run_collector_end(&coll);
    g_collector = 0;
    mpt_run_unprofiled_say(status_dir, o.quiet);
    mpt_run_status_dir_print(status_dir);
    if (r == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "mimprof run: cannot run '%s': %s\n", cmd[0], strerror(exec_errno));
        return EXIT_CANNOT_RUN;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "mimprof run: '%s' was killed by signal %d (%s)%s\n", cmd[0], sig,
                strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
        if (files)
            mpt_run_summarize(abs_dir, started, pid, false);
        return 128 + sig;
    }
    if (files)
        mpt_run_summarize(abs_dir, started, pid, o.quiet);
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_OWN_ERROR;
}
