/* A program with known heap phases (issue 18's test program):
 *   keep_old     40 MiB allocated at the start and kept to the end
 *   spike        120 MiB allocated after that and freed again
 *   (sleep SECONDS, argv[1], default 11)
 *   keep_young   20 MiB allocated just before the end, kept
 * in 64 KiB blocks, each written (resident). Exits without freeing, so the
 * exit report holds old and young memory, and ages tell them apart. */
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

static __attribute__((noinline)) void **keep_old(void) { return fill(40); }
static __attribute__((noinline)) void **keep_young(void) { return fill(20); }

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
