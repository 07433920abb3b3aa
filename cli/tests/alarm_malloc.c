/* SPDX-License-Identifier: MIT */
/* A program that allocates in a signal handler (undefined behaviour:
 * malloc is not async-signal-safe; glibc usually survives it): a SIGALRM
 * every 200 us mallocs and frees while the main loop churns, for a fixed
 * number of rounds. test_run.py's Signals.test_malloc_in_a_signal_handler
 * runs it under `mimprof run -i 1k -e 100ms`: whatever the allocator's
 * state ends up being, the profiler's part never hangs. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile unsigned long handled;

static void on_alarm(int sig)
{
    (void)sig;
    char *p = malloc(64);
    if (p != NULL)
        p[0] = 1;
    free(p);
    handled++;
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 300000;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    void *keep[256] = {0};
    for (unsigned long i = 0; i < rounds; i++) {
        unsigned k = (unsigned)(i * 2654435761u) % 256;
        free(keep[k]);
        keep[k] = malloc(16 + i % 3000);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (int k = 0; k < 256; k++)
        free(keep[k]);
    return 0;
}
