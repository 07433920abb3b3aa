/* SPDX-License-Identifier: MIT */
/* The cost and shape of fitting a wide report to the server's limits:
 * 2^BITS live stacks (tp_build_wide, 4 KiB each), fitted with the
 * default limits (16,000 samples, 2 MiB burst less 200 label bytes).
 * Prints the report's size, the parts and the CPU time, median of 5.
 * Usage: bench-pyroscope-fit [BITS=16] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fit.h"
#include "harness.h"

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int bits = argc > 1 ? atoi(argv[1]) : 16;
    if (bits < 1 || bits > 24)
        return 2;
    size_t len;
    uint8_t *in = tp_build_wide(bits, 4096, 1700000000000000000, &len);
    double ms[5];
    mp_pyro_parts parts = {0};
    for (int r = 0; r < 5; r++) {
        mp_pyro_parts_free(&parts);
        char err[256];
        double t0 = cpu_ms();
        if (mp_pyro_fit(in, len, 16000, (2u << 20) - 200, NULL, &parts, err, sizeof err) !=
            MP_PYRO_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        ms[r] = cpu_ms() - t0;
    }
    qsort(ms, 5, sizeof ms[0], cmp);
    size_t total = 0, largest = 0;
    for (size_t i = 0; i < parts.n; i++) {
        total += parts.v[i].len;
        largest = parts.v[i].len > largest ? parts.v[i].len : largest;
    }
    printf("report: %zu bytes, %llu samples, %llu stacks\n", len, 2ull << bits, 1ull << bits);
    printf("parts: %zu, %zu bytes in all, largest %zu\n", parts.n, total, largest);
    printf("fit: %.1f ms CPU (median of 5)\n", ms[2]);
    mp_pyro_parts_free(&parts);
    free(in);
    return 0;
}
