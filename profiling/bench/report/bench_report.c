/* SPDX-License-Identifier: MIT */
/* Benchmark of the report side: one report of 100,000 live samples with
 * distinct real stacks of this program (depth ~24, 16 functions with 16
 * call sites each), symbolization `lines` (DWARF + inlined frames).
 *
 * Prints: the first report's time (cold caches: ELF and DWARF read), the
 * median of the following reports (warm caches), the symbol memory the
 * report cache accounts (mp_report_cache_symbol_bytes), the heap growth
 * over the first report as malloc sees it (mallinfo2: includes libdw's
 * own structures), the RSS growth, and the profile size.
 *
 * bench-report-cxx is the same program over C++ stacks (cxx_stacks.cpp:
 * members of class templates in a namespace, long mangled names), so
 * that the cost of demangling shows.
 *
 * Usage: bench-report[-cxx] [samples] [reports] [none|functions|lines]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report_builder.h"

#define DEPTH 24
#define MAXF  40

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static unsigned next_choice(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 40) & 15;
}

static void *frames[MAXF];
static int nframes;

typedef void (*fn_t)(int);
static fn_t table[16];

#if BENCH_CXX
int bench_cxx_capture(int depth, void **frames, int max);
#endif

/* Sixteen functions, each with sixteen distinct call sites (a switch), so
 * a report has ~256 distinct return addresses in them. */
// clang-format off
#define CALL(k)                                                                                    \
    case k:                                                                                        \
        table[k](left - 1);                                                                        \
        break;
#define DEFINE(n)                                                                                  \
    __attribute__((noinline)) static void bench_f##n(int left)                                     \
    {                                                                                              \
        if (left == 0) {                                                                           \
            nframes = backtrace(frames, MAXF);                                                     \
            return;                                                                                \
        }                                                                                          \
        switch (next_choice()) {                                                                   \
            CALL(0) CALL(1) CALL(2) CALL(3) CALL(4) CALL(5) CALL(6) CALL(7)                        \
            CALL(8) CALL(9) CALL(10) CALL(11) CALL(12) CALL(13) CALL(14) CALL(15)                  \
        }                                                                                          \
        __asm__ volatile("" ::: "memory");                                                         \
    }
DEFINE(0) DEFINE(1) DEFINE(2) DEFINE(3) DEFINE(4) DEFINE(5) DEFINE(6) DEFINE(7)
DEFINE(8) DEFINE(9) DEFINE(10) DEFINE(11) DEFINE(12) DEFINE(13) DEFINE(14) DEFINE(15)

static double now(void)
// clang-format on
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    int reports = argc > 2 ? atoi(argv[2]) : 6;
    mp_prof_symbolize mode = MP_PROF_SYMBOLIZE_LINES;
    if (argc > 3)
        mode = strcmp(argv[3], "none") == 0        ? MP_PROF_SYMBOLIZE_NONE
               : strcmp(argv[3], "functions") == 0 ? MP_PROF_SYMBOLIZE_FUNCTIONS
                                                   : MP_PROF_SYMBOLIZE_LINES;
    fn_t fs[16] = {bench_f0,  bench_f1,  bench_f2,  bench_f3, bench_f4,  bench_f5,
                   bench_f6,  bench_f7,  bench_f8,  bench_f9, bench_f10, bench_f11,
                   bench_f12, bench_f13, bench_f14, bench_f15};
    memcpy(table, fs, sizeof fs);

    /* Capture n real stacks (skip backtrace's own frame: start at 1). */
    uintptr_t *pcs = malloc(n * MAXF * sizeof *pcs);
    size_t *depth = malloc(n * sizeof *depth);
    for (size_t i = 0; i < n; i++) {
#if BENCH_CXX
        nframes = bench_cxx_capture(DEPTH, frames, MAXF);
#else
        bench_f0(DEPTH);
#endif
        depth[i] = (size_t)(nframes - 1);
        for (int k = 1; k < nframes; k++)
            pcs[i * MAXF + (size_t)k - 1] = (uintptr_t)frames[k];
    }

    mp_report_cache *c = mp_report_cache_new();
    double *t = calloc((size_t)reports, sizeof *t);
    double *ct = calloc((size_t)reports, sizeof *ct);
    size_t bytes = 0, len = 0, symbol_bytes = 0, heap_growth = 0;
    long rss_growth = 0;
    int quality = -1;
    for (int r = 0; r < reports; r++) {
        struct mallinfo2 m0 = mallinfo2();
        long rss0 = rss_kib();
        double t0 = now(), c0 = cpu_now();
        mp_report_options o = {.period = 524288, .symbolize = mode};
        mp_report_builder *b = mp_report_begin(c, &o);
        double v[MP_VAL_COUNT] = {0, 0, 1.25, 655360.5};
        for (size_t i = 0; i < n; i++)
            if (mp_report_add(b, &pcs[i * MAXF], depth[i], false, v, false) != MP_PROF_OK)
                return 1;
        uint8_t *out;
        if (mp_report_finish(b, &out, &len) != MP_PROF_OK)
            return 1;
        t[r] = now() - t0;
        ct[r] = cpu_now() - c0;
        if (r == 0) {
            struct mallinfo2 m1 = mallinfo2();
            heap_growth = m1.uordblks > m0.uordblks ? m1.uordblks - m0.uordblks : 0;
            rss_growth = rss_kib() - rss0;
            symbol_bytes = mp_report_cache_symbol_bytes(c);
            quality = mp_report_cache_last_quality(c);
        }
        bytes = len;
        free(out);
    }
    double first = t[0], cfirst = ct[0];
    qsort(t + 1, (size_t)reports - 1, sizeof *t, cmp_double);
    qsort(ct + 1, (size_t)reports - 1, sizeof *ct, cmp_double);
    double warm = reports > 1 ? t[1 + (reports - 1) / 2] : 0;
    double cwarm = reports > 1 ? ct[1 + (reports - 1) / 2] : 0;
    printf("samples %zu  mode %s\n", n,
           mode == MP_PROF_SYMBOLIZE_LINES       ? "lines"
           : mode == MP_PROF_SYMBOLIZE_FUNCTIONS ? "functions"
                                                 : "none");
    printf("first report (cold)      %8.1f ms wall %8.1f ms cpu\n", first * 1e3, cfirst * 1e3);
    printf("later reports (median)   %8.1f ms wall %8.1f ms cpu  (%d reports)\n", warm * 1e3,
           cwarm * 1e3, reports - 1);
    printf("symbol bytes (cache)     %8.2f MiB\n", (double)symbol_bytes / (1 << 20));
    printf("heap held after report 1 %8.2f MiB  (mallinfo2, incl. libdw)\n",
           (double)heap_growth / (1 << 20));
    printf("RSS growth over report 1 %8.2f MiB\n", (double)rss_growth / 1024);
    printf("profile size             %8.2f MiB  quality %d\n", (double)bytes / (1 << 20), quality);
    mp_report_cache_free(c);
    free(t);
    free(ct);
    free(pcs);
    free(depth);
    return 0;
}
