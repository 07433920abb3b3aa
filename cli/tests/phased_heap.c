/* SPDX-License-Identifier: MIT */
/* A program with known heap phases (the ages and peak tests' program):
 *   keep_old     40 MiB allocated at the start and kept to the end
 *   spike        120 MiB allocated after that and freed again
 *   (sleep SECONDS, argv[1], default 11)
 *   keep_young   20 MiB allocated just before the end, kept
 * in 64 KiB blocks, each written (resident). Exits without freeing, so the
 * exit report holds old and young memory, and ages tell them apart. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK ((size_t)64 << 10)
#define MIB   ((size_t)1 << 20)

static void *volatile sink;

static __attribute__((noinline)) void **fill(size_t mib)
{
    size_t n = mib * MIB / BLOCK;
    void **v = malloc(n * sizeof *v);
    for (size_t i = 0; v != NULL && i < n; i++) {
        v[i] = malloc(BLOCK);
        if (v[i] != NULL)
            memset(v[i], 1, BLOCK);
    }
    return v;
}

/* Not tail calls: keep_old and keep_young stay on the sampled stacks. */
static __attribute__((noinline)) void **keep_old(void)
{
    void **v = fill(40);
    __asm__ volatile("" : : "g"(v) : "memory");
    return v;
}

static __attribute__((noinline)) void **keep_young(void)
{
    void **v = fill(20);
    __asm__ volatile("" : : "g"(v) : "memory");
    return v;
}

static __attribute__((noinline)) void spike(void)
{
    size_t n = 120 * MIB / BLOCK;
    void **v = fill(120);
    for (size_t i = 0; v != NULL && i < n; i++)
        free(v[i]);
    free(v);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 11.0;
    sink = keep_old();
    spike();
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
    sink = keep_young();
    return 0;
}
