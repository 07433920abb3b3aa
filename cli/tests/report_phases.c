/* SPDX-License-Identifier: MIT */
/* A program with known phases for `mimprof report` (test_report.py):
 *   early_site   16 MiB allocated first and kept to the end
 *   (sleep 4 s: early memory is at least 4 s old at every later report)
 *   grow_site    2 MiB every 250 ms, 6 times, kept: a site that grows
 *   spike_site   48 MiB allocated after the third step of growth and
 *                freed at once: only the window's peak sees it
 * in 64 KiB blocks, each written (resident). Prints "done" at the end. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK ((size_t)64 << 10)
#define MIB   ((size_t)1 << 20)

static void nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Exported and not inlined: the reports name them. */
void **early_site(size_t mib);
void **grow_site(size_t mib);
void **spike_site(size_t mib);
#define SITE(name)                                                                                 \
    __attribute__((noinline)) void **name(size_t mib)                                              \
    {                                                                                              \
        size_t n = mib * MIB / BLOCK;                                                              \
        void **v = malloc(n * sizeof *v);                                                          \
        for (size_t i = 0; v != NULL && i < n; i++) {                                              \
            if ((v[i] = malloc(BLOCK)) == NULL)                                                    \
                exit(3);                                                                           \
            memset(v[i], 1, BLOCK);                                                                \
        }                                                                                          \
        __asm__ volatile("" : : "g"(v) : "memory");                                                \
        return v;                                                                                  \
    }
SITE(early_site)
SITE(grow_site)
SITE(spike_site)

int main(void)
{
    void **early = early_site(16);
    nap(4000);
    for (int step = 0; step < 6; step++) {
        grow_site(2);
        if (step == 2) {
            void **spike = spike_site(48);
            for (size_t i = 0; spike != NULL && i < 48 * MIB / BLOCK; i++)
                free(spike[i]);
            free(spike);
        }
        nap(250);
    }
    __asm__ volatile("" : : "g"(early) : "memory");
    printf("done\n");
    return 0;
}
