/* SPDX-License-Identifier: MIT */
/* Benchmark of the demangler (src/report/demangle.c): CPU time per name
 * over the linkage names read from standard input (one a line), each
 * demangled ten times, e.g. every C++ name libstdc++ exports:
 *
 *   nm -D --defined-only /usr/lib/x86_64-linux-gnu/libstdc++.so.6 |
 *     awk '$3 ~ /^_Z/ {print $3}' | bench-demangle
 *
 * A report demangles each distinct linkage name once per process (cached
 * with the symbol strings), so this times the whole naming cost of a
 * first report: names x this figure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/demangle.h"

#define MAX_NAMES 100000

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    char **names = malloc(MAX_NAMES * sizeof *names);
    char line[MP_DEMANGLE_MAX_INPUT + 2];
    size_t n = 0;
    while (names != NULL && n < MAX_NAMES && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if ((names[n] = strdup(line)) == NULL)
            return 1;
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "bench-demangle: no names on standard input\n");
        return 2;
    }
    static char out[1 << 16];
    size_t demangled = 0;
    double t0 = cpu_now();
    for (int r = 0; r < 10; r++)
        for (size_t i = 0; i < n; i++)
            demangled += mp_demangle(names[i], out, sizeof out) >= 0;
    double t = cpu_now() - t0;
    printf("%zu names, %zu of them demangled, %.2f us of CPU per name\n", n, demangled / 10,
           t * 1e6 / (10.0 * (double)n));
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return 0;
}
