/* SPDX-License-Identifier: MIT */
/* bench_image: the cost of mp_profiler_write_image() with 100,000 live
 * samples, and the longest any allocating thread waits meanwhile.
 *
 *   bench_image [DIR [ROUNDS [THREADS [LIVE]]]]
 *
 * DIR (default /tmp) receives the image; ROUNDS images are written (default
 * 20), THREADS threads (default 1) allocate and free all the time, LIVE
 * live samples are made first (default 100,000).
 *
 * Population: with a 64-byte sampling interval, LIVE blocks of 1 KiB are
 * allocated and kept (p = 1 - exp(-16): every one is sampled) from 8 leaf
 * sites under recursions 1..24 deep (192 distinct stacks, 5-28 frames).
 * The churn threads then allocate and free blocks of 64..512 bytes at the
 * same 64-byte interval, so that 63-100% of their operations are sampling
 * hits: each takes the recorder lock (shared), inserts into and removes
 * from the live table, which is the worst case for an image's quiet point
 * and its stripe-by-stripe copy. Every operation (an allocation plus a
 * free) is timed with CLOCK_MONOTONIC; the longest during a write and the
 * longest outside any write are reported, with the quiet point (the time
 * the recorder lock was held exclusively) from the library's own timing.
 * On a machine with fewer CPUs than THREADS + 1 the longest operations are
 * scheduler time slices, not the profiler: compare with the "outside"
 * column. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

#include "heap_image_write.h"

MP_PROF_SAMPLING_ALLOCATOR(bi, mp_sys_mimalloc);

#define NO_TAIL(x) __asm__ volatile("" : : "g"(x) : "memory")

static uint64_t clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* ---- the population ---- */

static void **g_live;
static size_t g_nlive;

#define LEAF(n)                                                                                    \
    void leaf##n(void);                                                                            \
    __attribute__((noinline)) void leaf##n(void)                                                   \
    {                                                                                              \
        void *p = bi_alloc(1024, 16);                                                              \
        if (p == NULL)                                                                             \
            abort();                                                                               \
        g_live[g_nlive++] = p;                                                                     \
        NO_TAIL(p);                                                                                \
    }
LEAF(0)
LEAF(1)
LEAF(2)
LEAF(3)
LEAF(4)
LEAF(5)
LEAF(6)
LEAF(7)
static void (*const LEAVES[8])(void) = {leaf0, leaf1, leaf2, leaf3, leaf4, leaf5, leaf6, leaf7};

void descend(unsigned depth, unsigned leaf);
__attribute__((noinline)) void descend(unsigned depth, unsigned leaf)
{
    if (depth == 0)
        LEAVES[leaf]();
    else
        descend(depth - 1, leaf);
    NO_TAIL(depth);
}

/* ---- the churn ---- */

typedef struct churn {
    pthread_t th;
    uint64_t rng;
    uint64_t ops, ops_during;
    uint64_t max_during, max_outside;
    uint64_t over_during[3], over_outside[3]; /* pairs longer than 0.1, 0.5, 1 ms */
    /* pairs longer than 0.5 ms during writes, by what the thread did
     * meanwhile (getrusage deltas): waited (a voluntary switch: a lock or
     * a page), was preempted only (involuntary switches), or neither */
    uint64_t slow_waited, slow_preempted, slow_other;
} churn;

static const uint64_t OVER_NS[3] = {100000, 500000, 1000000};

static _Atomic int g_stop;
static _Atomic int g_writing;

void *churn_site(size_t size);
__attribute__((noinline)) void *churn_site(size_t size)
{
    void *p = bi_alloc(size, 8);
    NO_TAIL(p);
    return p;
}

static void usage_now(struct rusage *u) { getrusage(RUSAGE_THREAD, u); }

static void *churn_main(void *arg)
{
    churn *c = arg;
    struct rusage last;
    usage_now(&last);
    unsigned since = 0;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        c->rng ^= c->rng << 13;
        c->rng ^= c->rng >> 7;
        c->rng ^= c->rng << 17;
        size_t size = 64 + (c->rng % 449);
        int during = atomic_load_explicit(&g_writing, memory_order_relaxed);
        uint64_t t0 = now_ns();
        void *p = churn_site(size);
        if (p == NULL)
            abort();
        *(volatile char *)p = 1;
        bi_dealloc(p, size, 8);
        uint64_t dt = now_ns() - t0;
        during |= atomic_load_explicit(&g_writing, memory_order_relaxed);
        for (int k = 0; k < 3; k++)
            if (dt > OVER_NS[k])
                (during ? c->over_during : c->over_outside)[k]++;
        if (dt > 500000 || ++since == 1024) {
            struct rusage u;
            usage_now(&u);
            if (dt > 500000 && during) {
                if (u.ru_nvcsw > last.ru_nvcsw)
                    c->slow_waited++;
                else if (u.ru_nivcsw > last.ru_nivcsw)
                    c->slow_preempted++;
                else
                    c->slow_other++;
            }
            last = u;
            since = 0;
        }
        if (during) {
            c->ops_during++;
            if (dt > c->max_during)
                c->max_during = dt;
        } else if (dt > c->max_outside) {
            c->max_outside = dt;
        }
        c->ops++;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int rounds = argc > 2 ? atoi(argv[2]) : 20;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    size_t live = argc > 4 ? (size_t)atol(argv[4]) : 100000;
    if (rounds < 1 || threads < 0 || threads > 64 || live < 1) {
        fprintf(stderr, "usage: bench_image [DIR [ROUNDS [THREADS [LIVE]]]]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_image.%ld.mpimg", dir, (long)getpid());

    bi_dealloc(bi_alloc(16, 8), 16, 8);
    mp_prof_config cfg;
    mp_prof_config_init(&cfg);
    cfg.sample_interval_bytes = 64;
    cfg.seed = 1;
    cfg.symbolize = MP_PROF_SYMBOLIZE_NONE;
    mp_profiler *prof;
    if (mp_profiler_start(&cfg, &prof) != MP_PROF_OK)
        return 1;
    g_live = malloc(live * sizeof *g_live);
    for (size_t i = 0; i < live; i++)
        descend(1 + (unsigned)(i / 8 % 24), (unsigned)(i % 8));
    /* The fill's records would otherwise sit in the ring and shards. */
    uint8_t *buf;
    size_t len;
    if (mp_profiler_report(prof, &buf, &len) != MP_PROF_OK)
        return 1;
    mp_prof_buffer_free(buf);
    mp_prof_stats st;
    mp_prof_diagnostics(&st);

    churn *cs = calloc((size_t)threads + 1, sizeof *cs);
    for (int i = 0; i < threads; i++) {
        cs[i].rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
        pthread_create(&cs[i].th, NULL, churn_main, &cs[i]);
    }
    usleep(200000); /* warm: rings, shards, live table at their steady state */

    uint64_t *total = calloc((size_t)rounds, sizeof *total);
    uint64_t *quiet = calloc((size_t)rounds, sizeof *quiet);
    uint64_t *wr = calloc((size_t)rounds, sizeof *wr);
    uint64_t *cpu = calloc((size_t)rounds, sizeof *cpu);
    uint64_t *copy = calloc((size_t)rounds, sizeof *copy);
    uint64_t samples = 0;
    for (int r = 0; r < rounds; r++) {
        usleep(50000);
        atomic_store(&g_writing, 1);
        uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        uint64_t t0 = now_ns();
        mp_prof_status s = mp_profiler_write_image(prof, path);
        uint64_t t1 = now_ns();
        cpu[r] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
        atomic_store(&g_writing, 0);
        if (s != MP_PROF_OK) {
            fprintf(stderr, "write_image: %s\n", mp_prof_strerror(s));
            return 1;
        }
        mp_himg_timing tm;
        mp_himg_last_timing(&tm);
        total[r] = t1 - t0;
        quiet[r] = tm.quiet_ns;
        wr[r] = tm.write_ns;
        copy[r] = tm.stripe_copy_ns;
        samples = tm.live_samples;
    }
    usleep(50000);
    atomic_store(&g_stop, 1);
    mp_prof_stats end;
    mp_prof_diagnostics(&end);
    uint64_t max_during = 0, max_outside = 0, ops = 0, ops_during = 0;
    uint64_t over_d[3] = {0}, over_o[3] = {0}, waited = 0, preempted = 0, other = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(cs[i].th, NULL);
        ops += cs[i].ops;
        ops_during += cs[i].ops_during;
        waited += cs[i].slow_waited;
        preempted += cs[i].slow_preempted;
        other += cs[i].slow_other;
        for (int k = 0; k < 3; k++) {
            over_d[k] += cs[i].over_during[k];
            over_o[k] += cs[i].over_outside[k];
        }
        if (cs[i].max_during > max_during)
            max_during = cs[i].max_during;
        if (cs[i].max_outside > max_outside)
            max_outside = cs[i].max_outside;
    }
    struct stat sb;
    long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    unlink(path);
    qsort(total, (size_t)rounds, sizeof *total, cmp_u64);
    qsort(quiet, (size_t)rounds, sizeof *quiet, cmp_u64);
    qsort(wr, (size_t)rounds, sizeof *wr, cmp_u64);
    qsort(cpu, (size_t)rounds, sizeof *cpu, cmp_u64);
    qsort(copy, (size_t)rounds, sizeof *copy, cmp_u64);
    int mid = rounds / 2;
    printf("image: %llu live samples (%llu stacks in the session), %.2f MB, %s\n",
           (unsigned long long)samples, (unsigned long long)st.stacks, (double)size / 1e6, dir);
    printf("write_image total   : min %.2f ms, median %.2f ms, max %.2f ms (%d rounds)\n",
           (double)total[0] / 1e6, (double)total[mid] / 1e6, (double)total[rounds - 1] / 1e6,
           rounds);
    printf("write_image CPU     : min %.2f ms, median %.2f ms, max %.2f ms (the writing thread)\n",
           (double)cpu[0] / 1e6, (double)cpu[mid] / 1e6, (double)cpu[rounds - 1] / 1e6);
    printf("  of which mp_img_write (trace, emit, write, 2x fdatasync, rename): median %.2f ms\n",
           (double)wr[mid] / 1e6);
    printf("  quiet point (recorder lock asked for .. released): min %.1f us, median %.1f us, "
           "max %.1f us\n",
           (double)quiet[0] / 1e3, (double)quiet[mid] / 1e3, (double)quiet[rounds - 1] / 1e3);
    printf("  longest live-table stripe copy (one stripe locked): median %.1f us, max %.1f us\n",
           (double)copy[mid] / 1e3, (double)copy[rounds - 1] / 1e3);
    if (threads > 0)
        printf("churn threads: %d, %llu alloc+free pairs (%llu during writes); longest pair "
               "during a write %.3f ms, outside any write %.3f ms\n",
               threads, (unsigned long long)ops, (unsigned long long)ops_during,
               (double)max_during / 1e6, (double)max_outside / 1e6);
    if (threads > 0)
        printf("  pairs longer than 0.1 / 0.5 / 1 ms: during writes %llu / %llu / %llu, "
               "outside %llu / %llu / %llu\n",
               (unsigned long long)over_d[0], (unsigned long long)over_d[1],
               (unsigned long long)over_d[2], (unsigned long long)over_o[0],
               (unsigned long long)over_o[1], (unsigned long long)over_o[2]);
    if (threads > 0)
        printf("  sampling hits in the churn: %llu (%.0f%% of its allocations)\n",
               (unsigned long long)(end.samples_taken - st.samples_taken),
               ops ? 100.0 * (double)(end.samples_taken - st.samples_taken) / (double)ops : 0.0);
    if (threads > 0)
        printf("  pairs longer than 0.5 ms during writes: %llu waited (voluntary switch), %llu "
               "preempted only, %llu neither\n",
               (unsigned long long)waited, (unsigned long long)preempted,
               (unsigned long long)other);
    mp_profiler_free(prof);
    return 0;
}
