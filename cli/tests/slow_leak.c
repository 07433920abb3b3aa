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
 */
#define _GNU_SOURCE
#include <dirent.h>
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

static mp_prof_control *g_ctl;
static bool g_serve_children;

static void control_open(void)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.http = getenv("SLOW_LEAK_HTTP");
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
