/* SPDX-License-Identifier: MIT */
/* `mimprof run`'s side of the collector (collector.h): starts it, hands
 * the command its socket, relays its messages while the command runs, and
 * tells it when the command's process has ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "collector.h"
#include "rt_collector.h"
#include "run.h"

/* In the collector's process: a session of its own (the terminal's
 * signals and hang-up are not for it), "/" as its directory (it holds no
 * file system busy), /dev/null as its standard descriptors and no other
 * descriptor of the caller (it never holds the caller's terminal or
 * pipes), then the loop. */
static void collector_child(int sock, int notify, int ctl, const mpt_coll_opts *o)
{
    setsid();
    prctl(PR_SET_NAME, "mimprof-collect", 0, 0, 0);
    if (chdir("/") != 0)
        _exit(1);
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        _exit(1);
    /* 0-2 on /dev/null, the socket on 3, the pipes on 4 and 5, nothing else */
    int s = fcntl(sock, F_DUPFD, 10), n = fcntl(notify, F_DUPFD, 10), c = fcntl(ctl, F_DUPFD, 10);
    if (s < 0 || n < 0 || c < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
        dup2(s, 3) < 0 || dup2(n, 4) < 0 || dup2(c, 5) < 0)
        _exit(1);
    close_range(6, ~0U, 0);
    static const int reset[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        signal(reset[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    _exit(mpt_collector_main(3, 4, 5, o));
}

int mpt_run_collector_start(const run_opts *o, const char *abs_dir, mpt_run_coll *rc)
{
    rc->peer = rc->notify = rc->ctl = rc->sock = rc->pipe_out = rc->pipe_in = -1;
    int sv[2], np[2], cp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    if (pipe2(np, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pipe2(cp, O_CLOEXEC) != 0) {
        close(sv[0]);
        close(sv[1]);
        close(np[0]);
        close(np[1]);
        return -1;
    }
    /* The processes' queue: a small send buffer on their end. */
    int sndbuf = MPT_COLL_SNDBUF;
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    /* Frames are named by the collector, once per binary for the tree
     * (collector_symbols.c), unless a process serves /debug/pprof
     * (--http: its profiles are read from it directly). */
    /* Not for a process read from directly, whose own profiles must be
     * named: --http, --dormant (`mimprof ctl`), heap images. */
    bool names = strcmp(o->symbolize, "none") != 0 && o->http == NULL && !o->dormant &&
                 !o->image_on_exit && o->image_every == NULL && o->image_dir == NULL &&
                 getenv("MIMPROF_IMAGE") == NULL;
    mpt_coll_opts co = {.dir = abs_dir,
                        .keep = o->keep,
                        .keep_bytes = o->keep_bytes,
                        .quiet = o->quiet,
                        .upload = o->pyro,
                        .period_ms = o->every_ms,
                        .symbolize = !names ? MP_PROF_SYMBOLIZE_NONE
                                     : strcmp(o->symbolize, "lines") == 0
                                         ? MP_PROF_SYMBOLIZE_LINES
                                         : MP_PROF_SYMBOLIZE_FUNCTIONS};
    rc->sock = sv[0];
    rc->pipe_out = np[1];
    rc->pipe_in = cp[0];
    rc->opts = co;
    rc->notify = np[0];
    rc->ctl = cp[1];
    /* The command's end: at the top of the range, out of the program's
     * way; close-on-exec here, inherited by the command (run_exec.c). */
    rc->peer = mp_prof_fd_high(sv[1]);
    if (rc->peer == sv[1]) {
        /* No room at the top (a low RLIMIT_NOFILE): the socket would take
         * a number the program gets. No collector then. */
        close(rc->peer);
        close(rc->sock);
        close(rc->pipe_out);
        close(rc->pipe_in);
        close(rc->notify);
        close(rc->ctl);
        rc->peer = rc->sock = rc->pipe_out = rc->pipe_in = rc->notify = rc->ctl = -1;
        errno = EMFILE;
        return -1;
    }
    struct stat st;
    char spec[96];
    if (fstat(rc->peer, &st) != 0 ||
        snprintf(spec, sizeof spec, "%d:%llu:%llu", rc->peer, (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino) >= (int)sizeof spec ||
        setenv("MIMPROF_COLLECTOR", spec, 1) != 0 ||
        (names && setenv("MIMPROF_SYMBOLIZE", "none", 1) != 0)) {
        mpt_run_collector_end(rc);
        return -1;
    }
    return 0;
}

int mpt_run_collector_spawn(mpt_run_coll *rc)
{
    if (rc->sock < 0)
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(rc->peer);
        close(rc->notify);
        close(rc->ctl);
        collector_child(rc->sock, rc->pipe_out, rc->pipe_in, &rc->opts);
    }
    close(rc->sock);
    close(rc->pipe_out);
    close(rc->pipe_in);
    rc->sock = rc->pipe_out = rc->pipe_in = -1;
    if (pid < 0)
        return -1; /* the processes write their own reports (their sends fail) */
    rc->pid = pid;
    return 0;
}

/* Copies what the collector said to stderr; false at end of file. */
static bool relay(int fd)
{
    char buf[4096];
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0)
        return errno == EINTR || errno == EAGAIN;
    if (r == 0)
        return false;
    fwrite(buf, 1, (size_t)r, stderr);
    fflush(stderr);
    return true;
}

int mpt_run_collector_wait(mpt_run_coll *rc, pid_t child, int *status)
{
    /* The child's end as a pollable descriptor (Linux 5.3): messages are
     * relayed while it runs. Without it, they wait for its end. */
    int pfd = (int)syscall(SYS_pidfd_open, child, 0);
    while (pfd >= 0) {
        struct pollfd p[2] = {{.fd = pfd, .events = POLLIN}, {.fd = rc->notify, .events = POLLIN}};
        if (poll(p, rc->notify >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (rc->notify >= 0 && (p[1].revents & (POLLIN | POLLHUP)) && !relay(rc->notify)) {
            close(rc->notify);
            rc->notify = -1;
        }
        if (p[0].revents & POLLIN)
            break;
    }
    if (pfd >= 0)
        close(pfd);
    while (waitpid(child, status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

void mpt_run_collector_end(mpt_run_coll *rc)
{
    /* Our copy of the socket first, then the word: when the collector
     * reads it, the socket's end of file says whether any process of the
     * tree still holds it (collector.h). */
    if (rc->peer >= 0)
        close(rc->peer);
    rc->peer = -1;
    if (rc->ctl >= 0) {
        /* The collector may have ended already (every process gone): no
         * SIGPIPE for that. */
        struct sigaction ign = {.sa_handler = SIG_IGN}, old;
        sigaction(SIGPIPE, &ign, &old);
        while (write(rc->ctl, "x", 1) < 0 && errno == EINTR)
            ;
        sigaction(SIGPIPE, &old, NULL);
        close(rc->ctl);
    }
    rc->ctl = -1;
    while (rc->notify >= 0 && relay(rc->notify))
        ;
    if (rc->notify >= 0)
        close(rc->notify);
    rc->notify = -1;
    /* A collector that already ended (every process gone) is reaped; one
     * that serves a daemon goes on, and init reaps it. */
    if (rc->pid > 0)
        (void)waitpid(rc->pid, NULL, WNOHANG);
    unsetenv("MIMPROF_COLLECTOR");
}
