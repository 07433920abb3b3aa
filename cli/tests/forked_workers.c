/* SPDX-License-Identifier: MIT */
/* A preforking service: the master forks N workers; each allocates
 * BYTES (in 64 KiB blocks, kept live) and prints "worker PID" once it
 * has, then waits until it is told to end, as preforked servers
 * (nginx, a process per connection in PostgreSQL) do. With `setuid`
 * each worker drops to the user nobody first, as services started by
 * root do (memcached -u, nginx's workers). The master prints "ready"
 * when every worker is there, waits for a line (or end of file) on its
 * stdin, ends the workers with SIGTERM and exits when they have.
 * Used by test_collector.py.
 *
 * usage: mimprof-test-forked-workers N BYTES [setuid] */
#define _GNU_SOURCE
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* One call site, so the profile names it. */
__attribute__((noinline)) static void *worker_block(size_t n)
{
    void *p = malloc(n);
    if (p != NULL)
        memset(p, 0x5a, n);
    return p;
}

static int worker(size_t bytes, int drop, int ready)
{
    if (drop) {
        struct passwd *pw = getpwnam("nobody");
        if (pw == NULL || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            return 3;
    }
    enum { BLOCK = 64 << 10 };
    size_t n = bytes / BLOCK;
    void **keep = calloc(n + 1, sizeof *keep);
    for (size_t i = 0; i < n; i++)
        keep[i] = worker_block(BLOCK);
    char line[64];
    int len = snprintf(line, sizeof line, "worker %ld\n", (long)getpid());
    if (write(ready, line, (size_t)len) != len)
        return 4;
    close(ready);
    while (!g_stop)
        pause();
    for (size_t i = 0; i < n; i++)
        free(keep[i]);
    free(keep);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[1]);
    size_t bytes = strtoull(argv[2], NULL, 0);
    int drop = argc > 3 && strcmp(argv[3], "setuid") == 0;
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            return 1;
        if (pids[i] == 0) {
            close(p[0]);
            _exit(worker(bytes, drop, p[1]));
        }
    }
    close(p[1]);
    /* Relays the workers' lines: their pids, once each one holds its bytes. */
    FILE *in = fdopen(p[0], "r");
    char line[64];
    int seen = 0;
    while (seen < n && fgets(line, sizeof line, in) != NULL) {
        fputs(line, stdout);
        seen++;
    }
    printf("ready\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL && !g_stop)
        break;
    int failed = 0;
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGTERM);
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    printf("failed %d\n", failed);
    return failed == 0 ? 0 : 1;
}
