/* SPDX-License-Identifier: MIT */
/* One stack capture at depth 19, warm, with libunwind's unw_backtrace
 * (what sampler.c uses: a per-thread trace cache, validation only for
 * frames it has not seen) against libgcc's _Unwind_Backtrace (no memory
 * validation and no descriptor, but the unwind tables are interpreted
 * again for every frame). A program, not a test (BENCHMARKS.md, "Memory
 * validation").
 *
 *   bench_unwinders MODE ITERATIONS   MODE 0: unw_backtrace, 1: libgcc */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unwind.h>
static void *buf[64];
struct st {
    int n;
};
static _Unwind_Reason_Code cb(struct _Unwind_Context *c, void *a)
{
    struct st *s = a;
    if (s->n < 64)
        buf[s->n++] = (void *)_Unwind_GetIP(c);
    return _URC_NO_REASON;
}
static int mode;
static long iters;
static double res;
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
__attribute__((noinline)) static int leaf(void)
{
    double a = now();
    int n = 0;
    for (long i = 0; i < iters; i++) {
        if (mode == 0)
            n = unw_backtrace(buf, 64);
        else {
            struct st s = {0};
            _Unwind_Backtrace(cb, &s);
            n = s.n;
        }
    }
    res = (now() - a) / iters;
    return n;
}
__attribute__((noinline)) static int rec(int d)
{
    volatile int x = d;
    if (d == 0)
        return leaf();
    int r = rec(d - 1);
    return r + x - x;
}
int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    mode = atoi(argv[1]);
    iters = atol(argv[2]);
    int n = rec(14);
    printf("%s depth %d: %.0f ns per capture\n", mode ? "_Unwind_Backtrace" : "unw_backtrace", n,
           res);
    return 0;
}
