/* SPDX-License-Identifier: MIT */
/* A long-running service that leaks slowly, for the tests of a process
 * controlled while it runs (test_ctl.py): every 2 ms leak_slowly() keeps
 * 4 KiB for good and churn() allocates and frees a few blocks. It prints
 * "ready PID" on stdout once running, runs until its stdin reaches end of
 * file, then prints "leaked N" (blocks) and exits with status 3, so that
 * a test can tell its output and status apart from the profiler's. Each
 * line written to its stdin is answered with "count N" (blocks leaked).
 *
 *   slow_leak            the loop
 *   slow_leak fork       forks first; parent and child both loop (each
 *                        prints "ready PID"; the parent waits for the child)
 *   slow_leak exec       forks a child that executes `slow_leak` (plain)
 *   slow_leak fds        prints the descriptors open in it, "fd N" each,
 *                        below 1000, then loops (the do-no-harm check)
 *
 * Built with SLOW_LEAK_LIBRARY=1 (mimprof-test-slow-leak-lib) it is a
 * program that links libmimprof-profiling and nothing of mimprof-cli:
 * leak_slowly() and churn() allocate through a sampling allocator over
 * mimalloc, and main() opens the library's control
 * (<mimprof/profiling_control.h>) before it loops, dormant: the control
 * socket, and /debug/pprof on $SLOW_LEAK_HTTP when set. In `fork` mode
 * the child serves its own socket (serve_forked_children); `fork-none`
 * forks the same way, and the child serves none. A line "close"
 * on its stdin closes the control and "open" opens it again (each
 * answered with "count N" as any line).
 *
 * `hosted` opens the control with a host (mp_prof_control_host), as
 * `mimprof run`'s collector is one: a forked relay process binds
 * `@mimprof-ctl.<pid>` for it, accepts, and passes each connection over
 * a socketpair (SCM_RIGHTS), which take() receives; `mimprof ctl PID`
 * then talks to a socket whose server is the relay. `impostor` starts the
 * same relay, which answers every request itself instead (the client
 * must refuse it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if SLOW_LEAK_LIBRARY
#include <mimprof/profiling_control.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR(leak_alloc, mp_sys_mimalloc);
#define ALLOC(n)   leak_alloc_alloc((n), 16)
#define FREE(p, n) leak_alloc_dealloc((p), (n), 16)

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>

static mp_prof_control *g_ctl;
static bool g_serve_children;

/* ---- hosted / impostor: a relay process and the host over it --------- */

static int g_relay = -1;         /* our end of the socketpair to the relay */
static int g_wake[2] = {-1, -1}; /* wake() writes, take() polls */

/* The relay: binds the control socket of `owner`, then hands each
 * connection over `to` (or, as an impostor, answers it itself). Ends
 * when `to` closes (the owner exited). */
static void relay(long owner, int to, bool impostor)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name(owner, a.sun_path, sizeof a.sun_path);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 ||
        bind(ls, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) !=
            0 ||
        listen(ls, 16) != 0)
        _exit(1);
    if (write(to, "r", 1) != 1) /* bound: the owner may say it is ready */
        _exit(1);
    struct pollfd pf[2] = {{.fd = ls, .events = POLLIN}, {.fd = to, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        if (pf[1].revents != 0)
            _exit(0); /* the owner is gone */
        if (!(pf[0].revents & POLLIN))
            continue;
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        if (impostor) {
            char req[600];
            ssize_t r = read(c, req, sizeof req);
            (void)r;
            char ans[128];
            int len = snprintf(ans, sizeof ans, "ok\npid: %ld\nstate: dormant\n", owner);
            ssize_t w = send(c, ans, (size_t)len, MSG_NOSIGNAL); /* it may be gone */
            (void)w;
        } else {
            union {
                struct cmsghdr align;
                char b[CMSG_SPACE(sizeof(int))];
            } ctl;
            memset(&ctl, 0, sizeof ctl);
            struct iovec iov = {.iov_base = "f", .iov_len = 1};
            struct msghdr m = {.msg_iov = &iov,
                               .msg_iovlen = 1,
                               .msg_control = ctl.b,
                               .msg_controllen = sizeof ctl.b};
            struct cmsghdr *h = CMSG_FIRSTHDR(&m);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &c, sizeof c);
            if (sendmsg(to, &m, MSG_NOSIGNAL) != 1)
                _exit(1);
        }
        close(c);
    }
}

/* take(): the connections the relay passed, waiting up to timeout_ms. */
static int relay_take(void *ctx, int *fds, int max, int timeout_ms)
{
    (void)ctx;
    struct pollfd pf[2] = {{.fd = g_relay, .events = POLLIN}, {.fd = g_wake[0], .events = POLLIN}};
    int r = poll(pf, 2, timeout_ms);
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    if (pf[1].revents & POLLIN) {
        char sink[64];
        ssize_t rd = read(g_wake[0], sink, sizeof sink);
        (void)rd;
    }
    int n = 0;
    while (n < max && (pf[0].revents & (POLLIN | POLLHUP))) {
        union {
            struct cmsghdr align;
            char b[CMSG_SPACE(sizeof(int))];
        } ctl;
        char byte;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
        ssize_t got = recvmsg(g_relay, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (got == 0)
            return n > 0 ? n : -1; /* the relay is gone for good */
        if (got < 0)
            break;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        if (h != NULL && h->cmsg_type == SCM_RIGHTS)
            memcpy(&fds[n++], CMSG_DATA(h), sizeof(int));
    }
    return n;
}

static void relay_wake(void *ctx)
{
    (void)ctx;
    ssize_t w = write(g_wake[1], "w", 1);
    (void)w;
}

static const mp_prof_control_host g_relay_host = {.take = relay_take, .wake = relay_wake};

/* Starts the relay of this process and waits until it listens. */
static void relay_start(bool impostor)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0)
        exit(1);
    long owner = (long)getpid();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        close(sv[0]);
        relay(owner, sv[1], impostor);
    }
    close(sv[1]);
    g_relay = sv[0];
    char r;
    if (read(g_relay, &r, 1) != 1)
        exit(1);
}

static void control_open(void)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.http = getenv("SLOW_LEAK_HTTP");
    if (g_relay >= 0) {
        o.http = NULL;
        o.host = &g_relay_host;
    }
    o.serve_forked_children = g_serve_children;
    o.config.seed = 1;
    char why[512];
    if (mp_prof_control_open(&o, NULL, &g_ctl, why, sizeof why) != MP_PROF_OK) {
        fprintf(stderr, "slow_leak: no control: %s\n", why);
        exit(1);
    }
}
#else
#define ALLOC(n)   malloc(n)
#define FREE(p, n) free(p)
#endif

enum { LEAK_BYTES = 4096 };

static void **g_kept;
static size_t g_nkept, g_cap;

__attribute__((noinline)) static void leak_slowly(void)
{
    if (g_nkept == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 1024;
        g_kept = realloc(g_kept, g_cap * sizeof *g_kept);
        if (g_kept == NULL)
            exit(1);
    }
    char *p = ALLOC(LEAK_BYTES);
    if (p == NULL)
        exit(1);
    memset(p, 1, LEAK_BYTES);
    g_kept[g_nkept++] = p;
}

__attribute__((noinline)) static void churn(void)
{
    for (int i = 0; i < 16; i++) {
        void *volatile q = ALLOC(64 + (size_t)i * 48);
        FREE(q, 64 + (size_t)i * 48);
    }
}

static void print_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] != '.' && fd != self && fd < 1000)
            printf("fd %d\n", fd);
    }
    closedir(d);
}

/* Until stdin ends (or fails); each line read asks for "count N", the
 * blocks leaked so far. */
static void loop(void)
{
    struct pollfd pfd = {.fd = 0, .events = POLLIN};
    for (;;) {
        leak_slowly();
        churn();
        if (poll(&pfd, 1, 2) > 0) {
            char buf[256];
            ssize_t r = read(0, buf, sizeof buf);
            if (r <= 0)
                break;
#if SLOW_LEAK_LIBRARY
            if (r >= 5 && memcmp(buf, "close", 5) == 0) {
                mp_prof_control_close(g_ctl);
                g_ctl = NULL;
            } else if (r >= 4 && memcmp(buf, "open", 4) == 0) {
                control_open();
            }
#endif
            for (ssize_t i = 0; i < r; i++)
                if (buf[i] == '\n')
                    printf("count %zu\n", g_nkept);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
#if SLOW_LEAK_LIBRARY
    leak_slowly(); /* the sampling allocator has served: a session may start */
    g_serve_children = strcmp(mode, "fork") == 0;
    if (strcmp(mode, "hosted") == 0 || strcmp(mode, "impostor") == 0)
        relay_start(strcmp(mode, "impostor") == 0);
    control_open();
#endif
    pid_t child = -1;
    if (strcmp(mode, "fork") == 0 || strcmp(mode, "fork-none") == 0 || strcmp(mode, "exec") == 0) {
        fflush(stdout);
        child = fork();
        if (child < 0)
            return 1;
        if (child == 0 && strcmp(mode, "exec") == 0) {
            execl("/proc/self/exe", argv[0], (char *)NULL);
            _exit(1);
        }
    }
    if (strcmp(mode, "fds") == 0)
        print_fds();
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
    loop();
#if SLOW_LEAK_LIBRARY
    mp_prof_control_close(g_ctl);
#endif
    printf("leaked %zu\n", g_nkept);
    fflush(stdout);
    if (child > 0)
        waitpid(child, NULL, 0);
    return 3;
}
