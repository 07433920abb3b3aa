/* SPDX-License-Identifier: MIT */
/* Per-operation cost of the sampling allocator against the raw provider
 * (mimalloc), measured in the same run, interleaved (A B A B ...), the
 * median of the rounds reported. Not a test: it prints numbers.
 *
 *   bench_ops [--quick] [CASE...]       wall-clock cases (default: all)
 *     pair        unsampled malloc+free pair, 64 B, session running
 *                 (interval 2^40: nothing is sampled) and no session
 *     free_live   free of unsampled pointers (a shuffled pool of 1M) while
 *                 L = 0 .. 1M sampled blocks are live: the free-path filter
 *     sample      one sampled allocation (+ its free) at stack depth 16 and
 *                 64, against the raw pair
 *     churn       allocation churn, a live set of 8192 slots replaced at
 *                 random, at the default 512 KiB interval: throughput ratio
 *                 to raw mimalloc; "small" sizes 16..512 B, "mixed" sizes
 *                 16 B..64 KiB (mean 2.4 KiB)
 *     split       the churn overhead taken apart: allocation countdown
 *                 alone, free filter alone, both with nothing sampled,
 *                 everything at 512 KiB (ratios to raw, same round)
 *   bench_ops icount VARIANT N          N iterations of one variant with
 *                                       callgrind instrumentation on around
 *                                       the loop only (see callgrind.sh):
 *     pair-raw pair-sampled free-raw free-sampled small-raw small-sampled
 *     churn-raw churn-sampled (churn = the mixed workload)
 *     sample16-raw sample16-sampled (64 B pairs at stack depth 16, every
 *     allocation sampled: the difference is one sample with its free)
 *
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
 *
 * Sampled variants use MP_PROF_SAMPLING_ALLOCATOR_INLINE over
 * mp_sys_mimalloc (what the LD_PRELOAD object does inside malloc()); raw
 * variants call mp_sys_mimalloc_* (the same inlined provider calls). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(bm, mp_sys_mimalloc);

static int quick;
static void *volatile sink;

/* The measuring thread's CPU time: on a shared machine the time the thread
 * spends descheduled would otherwise land in whichever variant was running
 * (cache and memory-bandwidth interference from other jobs still counts). */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static mp_profiler *start(size_t interval, uint64_t seed)
{
    mp_prof_config c;
    mp_prof_config_init(&c);
    c.sample_interval_bytes = interval;
    c.seed = seed;
    c.symbolize = MP_PROF_SYMBOLIZE_NONE;
    mp_profiler *p = NULL;
    mp_prof_status st = mp_profiler_start(&c, &p);
    if (st != MP_PROF_OK) {
        fprintf(stderr, "start: %s\n", mp_prof_strerror(st));
        exit(1);
    }
    return p;
}

/* ------------------------------------------------------------------ pair */

__attribute__((noinline)) static void pair_raw(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = mp_sys_mimalloc_alloc(64, 8);
        sink = p;
        mp_sys_mimalloc_dealloc(p, 64, 8);
    }
}

__attribute__((noinline)) static void pair_sampled(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = bm_alloc(64, 8);
        sink = p;
        bm_dealloc(p, 64, 8);
    }
}

static void run_pair(const char *label, long n, int rounds)
{
    double raw[16], smp[16];
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        pair_raw(n);
        double t1 = now();
        pair_sampled(n);
        double t2 = now();
        raw[r] = (t1 - t0) / (double)n * 1e9;
        smp[r] = (t2 - t1) / (double)n * 1e9;
    }
    double a = median(raw, rounds), b = median(smp, rounds);
    printf("pair %-22s raw %6.2f ns  sampled %6.2f ns  delta %+5.2f ns  ratio %.3f\n", label, a, b,
           b - a, b / a);
}

static void case_pair(void)
{
    long n = quick ? 2000000 : 20000000;
    int rounds = quick ? 3 : 9;
    run_pair("(no session)", n, rounds);
    mp_profiler *p = start(MP_PROF_MAX_INTERVAL, 1);
    run_pair("(session, unsampled)", n, rounds);
    mp_profiler_free(p);
}

/* ------------------------------------------------------------- free_live */

static void shuffle(void **v, size_t n, uint64_t *s)
{
    for (size_t i = n - 1; i > 0; i--) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t j = (size_t)((*s >> 33) % (i + 1));
        void *t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static void case_free_live(void)
{
    static const size_t lives[] = {0, 1000, 10000, 100000, 1000000};
    size_t pool = quick ? 200000 : 1000000;
    int rounds = quick ? 3 : 5;
    void **v = malloc(pool * sizeof *v);
    uint64_t seed = 42;
    for (size_t li = 0; li < sizeof lives / sizeof *lives; li++) {
        size_t L = lives[li];
        if (quick && L > 100000)
            continue;
        /* L sampled live blocks: interval 1 samples every allocation */
        mp_profiler *p = start(1, 7);
        void **live = malloc((L + 1) * sizeof *live);
        for (size_t i = 0; i < L; i++)
            live[i] = bm_alloc(48, 8);
        mp_prof_stats s;
        mp_prof_diagnostics(&s);
        /* from here on this thread's allocations are unsampled: the bench
         * sets the template's countdown out of reach */
        mp_prof_hook_countdown = INT64_MAX;
        size_t bits = 0;
        for (unsigned w = 0; w < MP_PROF_HOOK_FILTER_WORDS; w++)
            bits += (size_t)__builtin_popcountll(mp_prof_hook_filter.bits[w]);
        double raw[8], smp[8];
        /* unsampled frees past the summary, past the 4 KiB word summary it
         * replaced (byte w set iff bits[w] is, w = page mod 4,096), past both levels */
        size_t pass1 = 0, pass_word = 0, pass2 = 0;
        for (int r = 0; r < rounds; r++) {
            for (size_t i = 0; i < pool; i++)
                v[i] = mp_sys_mimalloc_alloc(64, 8);
            shuffle(v, pool, &seed);
            double t0 = now();
            for (size_t i = 0; i < pool; i++)
                mp_sys_mimalloc_dealloc(v[i], 64, 8);
            double t1 = now();
            for (size_t i = 0; i < pool; i++)
                v[i] = bm_alloc(64, 8);
            if (r == 0)
                for (size_t i = 0; i < pool; i++) {
                    uint64_t a = (uint64_t)(uintptr_t)v[i];
                    pass1 += mp_prof_hook_summary_set_(MP_PROF_HOOK_SUMMARY_INDEX_(a)) != 0;
                    pass_word += mp_prof_hook_filter.bits[MP_PROF_HOOK_FILTER_WORD_(a)] != 0;
                    pass2 += mp_prof_hook_maybe_sampled(v[i]) != 0;
                }
            shuffle(v, pool, &seed);
            double t2 = now();
            for (size_t i = 0; i < pool; i++)
                bm_dealloc(v[i], 64, 8);
            double t3 = now();
            raw[r] = (t1 - t0) / (double)pool * 1e9;
            smp[r] = (t3 - t2) / (double)pool * 1e9;
        }
        double a = median(raw, rounds), b = median(smp, rounds);
        printf("free_live L=%-8zu live %-8llu filter bits set %5.2f%%  unsampled frees past the "
               "summary %5.2f%% (word summary %5.2f%%), to the table %5.2f%%  raw free %6.2f ns  "
               "sampled free %6.2f ns  delta %+6.2f ns\n",
               L, (unsigned long long)s.live_samples,
               100.0 * (double)bits / (double)(MP_PROF_HOOK_FILTER_WORDS * 64u),
               100.0 * (double)pass1 / (double)pool, 100.0 * (double)pass_word / (double)pool,
               100.0 * (double)pass2 / (double)pool, a, b, b - a);
        for (size_t i = 0; i < L; i++)
            bm_dealloc(live[i], 48, 8);
        free(live);
        mp_profiler_free(p);
    }
    free(v);
}

/* ---------------------------------------------------------------- sample */

static long g_sample_n;

__attribute__((noinline)) static double at_depth(int depth, int sampled)
{
    if (depth > 1) {
        double r = at_depth(depth - 1, sampled);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    double t0 = now();
    if (sampled)
        for (long i = 0; i < g_sample_n; i++) {
            void *p = bm_alloc(64, 8);
            sink = p;
            bm_dealloc(p, 64, 8);
        }
    else
        pair_raw(g_sample_n);
    return (now() - t0) / (double)g_sample_n * 1e9;
}

static void case_sample(void)
{
    static const int depths[] = {16, 64};
    g_sample_n = quick ? 20000 : 200000;
    int rounds = quick ? 3 : 7;
    for (size_t d = 0; d < sizeof depths / sizeof *depths; d++) {
        /* frames below main (libc start) count too: recurse a little less */
        int frames = depths[d];
        mp_prof_config c;
        mp_prof_config_init(&c);
        c.sample_interval_bytes = 1; /* every allocation is a sample */
        c.max_stack_depth = 64;
        c.symbolize = MP_PROF_SYMBOLIZE_NONE;
        mp_profiler *p = NULL;
        if (mp_profiler_start(&c, &p) != MP_PROF_OK)
            exit(1);
        double raw[8], smp[8];
        for (int r = 0; r < rounds; r++) {
            raw[r] = at_depth(frames - 3, 0);
            smp[r] = at_depth(frames - 3, 1);
            uint8_t *buf;
            size_t len;
            if (mp_profiler_report(p, &buf, &len) == MP_PROF_OK) /* keep buffers small */
                mp_prof_buffer_free(buf);
        }
        double a = median(raw, rounds), b = median(smp, rounds);
        printf("sample depth %-3d raw pair %6.2f ns  sampled pair %8.1f ns  one sample costs %7.1f "
               "ns\n",
               depths[d], a, b, b - a);
        mp_profiler_free(p);
    }
}

/* ----------------------------------------------------------------- churn */

#define SLOTS 8192

/* small: 16 B .. 512 B, uniform (mean 264 B) */
static size_t small_size(uint64_t r) { return 16 + (size_t)(r % 497); }

/* mixed: 70% 16..255 B, 25% 256 B..4 KiB, 5% 4..64 KiB (mean 2.4 KiB,
 * three quarters of the bytes in the 5% large ones) */
static size_t churn_size(uint64_t r)
{
    /* mostly small, some medium, a few large: 16 B .. 64 KiB */
    unsigned k = (unsigned)(r % 100);
    if (k < 70)
        return 16 + (size_t)((r >> 8) % 240);
    if (k < 95)
        return 256 + (size_t)((r >> 8) % 3840);
    return 4096 + (size_t)((r >> 8) % 61440);
}

#define CHURN(name, ALLOC, FREE, SIZE)                                                             \
    __attribute__((noinline)) static double name(long n, uint64_t seed)                            \
    {                                                                                              \
        static void *slot[SLOTS];                                                                  \
        static size_t size[SLOTS];                                                                 \
        double t0 = now();                                                                         \
        for (long i = 0; i < n; i++) {                                                             \
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;                         \
            unsigned k = (unsigned)(seed >> 51) & (SLOTS - 1);                                     \
            if (slot[k] != NULL)                                                                   \
                FREE(slot[k], size[k], 8);                                                         \
            size[k] = SIZE(seed >> 13);                                                            \
            slot[k] = ALLOC(size[k], 8);                                                           \
            *(char *)slot[k] = 1;                                                                  \
        }                                                                                          \
        double t = now() - t0;                                                                     \
        for (unsigned k = 0; k < SLOTS; k++) {                                                     \
            if (slot[k] != NULL)                                                                   \
                FREE(slot[k], size[k], 8);                                                         \
            slot[k] = NULL;                                                                        \
        }                                                                                          \
        return (double)n / t;                                                                      \
    }

CHURN(churn_raw, mp_sys_mimalloc_alloc, mp_sys_mimalloc_dealloc, churn_size)
CHURN(churn_sampled, bm_alloc, bm_dealloc, churn_size)
CHURN(small_raw, mp_sys_mimalloc_alloc, mp_sys_mimalloc_dealloc, small_size)
CHURN(small_sampled, bm_alloc, bm_dealloc, small_size)
/* One fast path at a time (split case): the allocation's countdown alone,
 * the free's filter alone. */
CHURN(small_countdown, bm_alloc, mp_sys_mimalloc_dealloc, small_size)
CHURN(small_filter, mp_sys_mimalloc_alloc, bm_dealloc, small_size)
CHURN(churn_countdown, bm_alloc, mp_sys_mimalloc_dealloc, churn_size)
CHURN(churn_filter, mp_sys_mimalloc_alloc, bm_dealloc, churn_size)

typedef double (*churn_fn)(long n, uint64_t seed);

static void run_churn(const char *label, churn_fn raw_fn, churn_fn smp_fn, long n, int rounds)
{
    mp_profiler *p = start(512 << 10, 0);
    double raw[32], smp[32], ratio[32];
    mp_prof_stats s0, s;
    raw_fn(n / 10, 1); /* warm both paths */
    smp_fn(n / 10, 1);
    mp_prof_diagnostics(&s0);
    for (int r = 0; r < rounds; r++) {
        /* A B / B A alternation cancels slow drifts */
        uint64_t seed = (uint64_t)r + 9;
        if (r % 2) {
            smp[r] = smp_fn(n, seed);
            raw[r] = raw_fn(n, seed);
        } else {
            raw[r] = raw_fn(n, seed);
            smp[r] = smp_fn(n, seed);
        }
        ratio[r] = smp[r] / raw[r];
    }
    mp_prof_diagnostics(&s);
    uint8_t *buf;
    size_t len;
    double t0 = now();
    mp_prof_status st = mp_profiler_report(p, &buf, &len);
    double rep = now() - t0;
    if (st == MP_PROF_OK)
        mp_prof_buffer_free(buf);
    double a = median(raw, rounds), b = median(smp, rounds), q = median(ratio, rounds);
    double samples = (double)(s.samples_taken - s0.samples_taken);
    printf("churn %-6s 512KiB raw %6.2f Mops/s  sampled %6.2f Mops/s  median ratio %.4f (%+.2f%%)  "
           "1 sample per %.0f ops, dropped %llu, report %.1f ms\n",
           label, a / 1e6, b / 1e6, q, (q - 1) * 100,
           samples > 0 ? (double)n * rounds / samples : 0,
           (unsigned long long)(s.dropped_registration + s.dropped_overflow_full +
                                s.dropped_teardown - s0.dropped_registration -
                                s0.dropped_overflow_full - s0.dropped_teardown),
           rep * 1e3);
    mp_profiler_free(p);
}

static void case_churn(void)
{
    long n = quick ? 2000000 : 10000000;
    int rounds = quick ? 3 : 15;
    run_churn("small", small_raw, small_sampled, n, rounds);
    run_churn("mixed", churn_raw, churn_sampled, n, rounds);
}

/* ----------------------------------------------------------------- split */

/* Where the churn overhead comes from: each round runs raw, the
 * allocation countdown alone, the free filter alone, both fast paths with
 * nothing sampled (interval 2^40), and everything at 512 KiB, in an order
 * rotated per round; ratios are to the same round's raw run. */
static void run_split(const char *label, churn_fn fns[5], long n, int rounds)
{
    static const char *names[5] = {"raw", "countdown only", "free filter only", "both fast paths",
                                   "all, 512 KiB"};
    double v[5][32], ratio[5][32];
    for (int k = 0; k < 5; k++)
        fns[k](n / 10, 1); /* warm every path */
    for (int r = 0; r < rounds; r++) {
        uint64_t seed = (uint64_t)r + 9;
        for (int j = 0; j < 5; j++) {
            int k = (j + r) % 5;
            mp_profiler *p = start(k == 4 ? (512 << 10) : MP_PROF_MAX_INTERVAL, 0);
            v[k][r] = fns[k](n, seed);
            mp_profiler_free(p);
        }
        for (int k = 0; k < 5; k++)
            ratio[k][r] = v[k][r] / v[0][r];
    }
    for (int k = 0; k < 5; k++) {
        double q = median(ratio[k], rounds);
        printf("split %-6s %-17s %7.2f Mops/s  median ratio to raw %.4f (%+.2f%%)\n", label,
               names[k], median(v[k], rounds) / 1e6, q, (q - 1) * 100);
    }
}

static void case_split(void)
{
    long n = quick ? 2000000 : 10000000;
    int rounds = quick ? 5 : 15;
    churn_fn small[5] = {small_raw, small_countdown, small_filter, small_sampled, small_sampled};
    churn_fn mixed[5] = {churn_raw, churn_countdown, churn_filter, churn_sampled, churn_sampled};
    run_split("small", small, n, rounds);
    run_split("mixed", mixed, n, rounds);
}

/* ---------------------------------------------------------------- icount */

static int icount(const char *variant, long n)
{
    mp_profiler *p = NULL;
    bool at16 = strncmp(variant, "sample16", 8) == 0;
    if (strstr(variant, "sampled") != NULL)
        p = start(strncmp(variant, "churn", 5) == 0 || strncmp(variant, "small", 5) == 0
                      ? (512 << 10)
                  : at16 ? 1
                         : MP_PROF_MAX_INTERVAL,
                  3);
    if (at16) { /* warm: the stack's frames learned, its depot entry made */
        g_sample_n = 1000;
        (void)at_depth(16 - 3, p != NULL);
        g_sample_n = n;
    }
    void **v = NULL;
    if (strncmp(variant, "free", 4) == 0) {
        v = malloc((size_t)n * sizeof *v);
        for (long i = 0; i < n; i++)
            v[i] =
                strcmp(variant, "free-raw") == 0 ? mp_sys_mimalloc_alloc(64, 8) : bm_alloc(64, 8);
    }
    churn_raw(1000, 1);
    churn_sampled(1000, 1);
    CALLGRIND_START_INSTRUMENTATION;
    if (strcmp(variant, "pair-raw") == 0)
        pair_raw(n);
    else if (strcmp(variant, "pair-sampled") == 0)
        pair_sampled(n);
    else if (strcmp(variant, "free-raw") == 0)
        for (long i = 0; i < n; i++)
            mp_sys_mimalloc_dealloc(v[i], 64, 8);
    else if (strcmp(variant, "free-sampled") == 0)
        for (long i = 0; i < n; i++)
            bm_dealloc(v[i], 64, 8);
    else if (strcmp(variant, "churn-raw") == 0)
        churn_raw(n, 5);
    else if (strcmp(variant, "churn-sampled") == 0)
        churn_sampled(n, 5);
    else if (strcmp(variant, "small-raw") == 0)
        small_raw(n, 5);
    else if (strcmp(variant, "small-sampled") == 0)
        small_sampled(n, 5);
    else if (at16)
        (void)at_depth(16 - 3, p != NULL);
    else {
        fprintf(stderr, "unknown variant %s\n", variant);
        return 2;
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    free(v);
    mp_profiler_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    /* this thread is observed; later sessions may start */
    bm_dealloc(bm_alloc(16, 8), 16, 8);
    if (argc >= 4 && strcmp(argv[1], "icount") == 0)
        return icount(argv[2], atol(argv[3]));
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        quick = 1;
        first = 2;
    }
    int all = first >= argc;
    for (int i = first; i < argc || all; i++) {
        const char *c = all ? NULL : argv[i];
        if (all || strcmp(c, "pair") == 0)
            case_pair();
        if (all || strcmp(c, "free_live") == 0)
            case_free_live();
        if (all || strcmp(c, "sample") == 0)
            case_sample();
        if (all || strcmp(c, "churn") == 0)
            case_churn();
        if (all || strcmp(c, "split") == 0)
            case_split();
        if (all)
            break;
    }
    return 0;
}
