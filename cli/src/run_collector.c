/* SPDX-License-Identifier: MIT */
/* `mimprof run`'s side of the collector (collector.h): starts it, hands
 * the command its socket, relays its messages while the command runs, and
 * tells it when the command's process has ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
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
    /* 0-2 on /dev/null, the listening socket on 3, the pipes on 4 and 5,
     * nothing else; as many descriptors as it may have (one per process
     * it watches, two for a hosted control). */
    int s = fcntl(sock, F_DUPFD, 10), n = fcntl(notify, F_DUPFD, 10), c = fcntl(ctl, F_DUPFD, 10);
    if (s < 0 || n < 0 || c < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
        dup2(s, 3) < 0 || dup2(n, 4) < 0 || dup2(c, 5) < 0)
        _exit(1);
    close_range(6, ~0U, 0);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    static const int reset[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        signal(reset[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    _exit(mpt_collector_main(3, 4, 5, o));
}

/* The listening socket on a fresh abstract name ("mimprof-collect.<pid>."
 * and 16 random hex digits, into name) and the token, from getrandom. */
static int bind_listener(char *name, size_t cap, uint8_t token[16])
{
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd || getrandom(token, 16, 0) != 16)
        return -1;
    int n = snprintf(name, cap, "mimprof-collect.%ld.", (long)getpid());
    for (size_t i = 0; i < sizeof rnd && n > 0 && (size_t)n + 2 < cap; i++)
        n += snprintf(name + n, cap - (size_t)n, "%02x", rnd[i]);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t len = strlen(name);
    if (len + 1 > sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a.sun_path + 1, name, len);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0 ||
        listen(fd, MPT_COLL_BACKLOG) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int mpt_run_collector_start(const run_opts *o, const char *abs_dir, mpt_run_coll *rc)
{
    rc->notify = rc->ctl = rc->sock = rc->pipe_out = rc->pipe_in = -1;
    char name[96];
    uint8_t token[16];
    int np[2], cp[2];
    int lfd = bind_listener(name, sizeof name, token);
    if (lfd < 0)
        return -1;
    if (pipe2(np, O_CLOEXEC) != 0) {
        close(lfd);
        return -1;
    }
    if (pipe2(cp, O_CLOEXEC) != 0) {
        close(lfd);
        close(np[0]);
        close(np[1]);
        return -1;
    }
    /* Frames are named by the collector, once per binary for the tree
     * (collector_symbols.c), but not for a process read from directly,
     * whose own profiles must be named: --http, --dormant (`mimprof
     * ctl`), heap images. */
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
    memcpy(co.token, token, sizeof co.token);
    rc->sock = lfd;
    rc->pipe_out = np[1];
    rc->pipe_in = cp[0];
    rc->opts = co;
    rc->notify = np[0];
    rc->ctl = cp[1];
    char spec[160];
    int n = snprintf(spec, sizeof spec, "%s:", name);
    for (size_t i = 0; i < sizeof token; i++)
        n += snprintf(spec + n, sizeof spec - (size_t)n, "%02x", token[i]);
    /* The collector names the reports; one a process writes itself (the
     * collector gone, stopped, its queue full) it names itself, functions
     * only (rt_report.c). */
    if (setenv("MIMPROF_COLLECTOR", spec, 1) != 0 ||
        (names && (setenv("MIMPROF_SYMBOLIZE", "none", 1) != 0 ||
                   setenv("MIMPROF_COLLECTOR_SYMBOLIZE", "functions", 1) != 0))) {
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
     * relayed while it runs. Without it, they wait for its end. As pid 1
     * of a namespace, every other child is reaped as it ends (run_init.c). */
    int pfd = (int)syscall(SYS_pidfd_open, child, 0);
    int chld = mpt_run_init_chld_fd();
    /* a child that ended before SIGCHLD was blocked */
    bool ended = chld >= 0 && mpt_run_init_reap(chld, rc, child, status);
    while (pfd >= 0 && !ended) {
        struct pollfd p[3] = {{.fd = pfd, .events = POLLIN},
                              {.fd = rc->notify, .events = POLLIN},
                              {.fd = chld, .events = POLLIN}};
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (rc->notify >= 0 && (p[1].revents & (POLLIN | POLLHUP)) && !relay(rc->notify)) {
            close(rc->notify);
            rc->notify = -1;
        }
        if (chld >= 0 && (p[2].revents & POLLIN) && mpt_run_init_reap(chld, rc, child, status))
            ended = true;
        if (p[0].revents & POLLIN)
            break;
    }
    if (pfd >= 0)
        close(pfd);
    if (chld >= 0)
        close(chld);
    /* As pid 1 without pidfd_open: any child's end, until the command's. */
    while (!ended) {
        int st;
        pid_t w = waitpid(chld >= 0 ? -1 : child, &st, 0);
        if (w < 0 && errno != EINTR)
            return -1;
        if (w == child) {
            *status = st;
            ended = true;
        } else if (w > 0 && w == rc->pid) {
            rc->pid = 0;
        }
    }
    return 0;
}

void mpt_run_collector_end(mpt_run_coll *rc)
{
    /* The word: the collector reads what is queued and says whether any
     * process of the tree is still alive (collector.h). */
    if (rc->sock >= 0) /* never forked */
        close(rc->sock);
    if (rc->pipe_out >= 0)
        close(rc->pipe_out);
    if (rc->pipe_in >= 0)
        close(rc->pipe_in);
    rc->sock = rc->pipe_out = rc->pipe_in = -1;
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
    unsetenv("MIMPROF_COLLECTOR_SYMBOLIZE");
}
