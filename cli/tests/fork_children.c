/* SPDX-License-Identifier: MIT */
/* A process per connection: forks N short-lived children, at most 4 at
 * a time; each allocates BYTES (in 16 KiB blocks, kept until it exits)
 * and exits after about MS milliseconds, as PostgreSQL's backends of
 * short connections do. Used by test_collector.py (retention for
 * services).
 *
 * usage: mimprof-test-fork-children N BYTES MS */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Where the blocks are kept: the compiler may not drop them. */
static void *volatile g_kept[4096];

/* One call site, so the profile names it. */
__attribute__((noinline, noclone)) static void *connection_block(size_t n)
{
    void *p = malloc(n);
    if (p != NULL)
        memset(p, 0x5a, n);
    return p;
}

static void child(size_t bytes, long ms)
{
    for (size_t i = 0; i * 16384 < bytes && i < 4096; i++)
        g_kept[i] = connection_block(16384);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
    exit(0); /* the exit report */
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int n = atoi(argv[1]);
    size_t bytes = strtoull(argv[2], NULL, 10);
    long ms = atol(argv[3]);
    int running = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        if (running == 4) {
            int st;
            if (wait(&st) > 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
                failed++;
            running--;
        }
        pid_t pid = fork();
        if (pid == 0)
            child(bytes, ms);
        if (pid < 0)
            return 1;
        running++;
    }
    int st;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    return failed == 0 ? 0 : 1;
}
