/* SPDX-License-Identifier: MIT */
/* A heap that ramps: 1 MiB kept every 100 ms for N steps, then (with
 * PERIOD_MS and OFFSET_MS) a wait until the wall clock is OFFSET_MS past a
 * multiple of PERIOD_MS, and exit(0): the exit lands where a test wants it
 * relative to mimprof's report boundaries. HOW: exit (default), _exit, or
 * term (a SIGTERM it does not handle, raised).
 *
 *   mimprof-test-ramp STEPS [PERIOD_MS OFFSET_MS [HOW]] */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int64_t ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0)
        ;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    static char *kept[4096];
    for (int i = 0; i < steps && i < 4096; i++) {
        kept[i] = malloc(1 << 20);
        if (kept[i] == NULL)
            return 1;
        memset(kept[i], i, 1 << 20);
        sleep_ms(100);
    }
    if (argc > 3) {
        int64_t period = atoll(argv[2]), offset = atoll(argv[3]);
        int64_t now = now_ms();
        int64_t at = now / period * period + offset;
        if (at <= now)
            at += period;
        sleep_ms(at - now);
    }
    const char *how = argc > 4 ? argv[4] : "exit";
    if (strcmp(how, "_exit") == 0)
        _exit(0);
    if (strcmp(how, "term") == 0)
        raise(SIGTERM);
    return 0;
}
