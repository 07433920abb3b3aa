/* SPDX-License-Identifier: MIT */
/*
 * mimprof-bench-workload: the reference workloads of the overhead benchmarks.
 *
 * One binary, the case chosen by argument. It links no allocator and no
 * profiler: the allocator (and the profiler) under test come in through
 * LD_PRELOAD, so the very same binary is measured under every
 * configuration. The profiler's counters are read at run time through
 * dlsym(RTLD_DEFAULT, "mp_prof_diagnostics"); without a mimprof preload
 * they print as 0 and `profiler=0`.
 *
 *   mimprof-bench-workload CASE [--window SECONDS] [--seed N]
 *   mimprof-bench-workload population [--objects N] [--size BYTES | --mixed] [--seed N]
 *   mimprof-bench-workload --list
 *
 * Cases (the interval in a name is the *profiler's* sampling interval that
 * the reference comparison uses; the workload does not set it: the driver
 * passes it to the profiler, e.g. MIMPROF_INTERVAL=1m):
 *
 *   alloc-1m-1w        one worker: malloc/free of service-like sizes
 *                      (80% 16-256 B, 18% 257 B-4 KiB, 2% 4-64 KiB), a
 *                      1024-slot ring of live objects
 *   alloc-1m-2w        the same on two workers
 *   alloc-1k-64k       one worker, fixed 64 KiB objects (dense sampling: at
 *                      a 1 KiB interval every allocation is sampled)
 *   live-1m            one worker over a 131072-object live heap (~135 MB):
 *                      each operation frees a random live object and
 *                      allocates its replacement
 *   mixed-churn        one worker, sizes 8 B-256 KiB skewed small, through
 *                      malloc, calloc, posix_memalign and aligned_alloc
 *   producer-consumer  one thread allocates, another frees (SPSC ring)
 *   realloc-heavy      one worker growing 256 buffers by realloc (x1.5 up
 *                      to 256 KiB) and shrinking them back
 *
 * Each case runs for the window (default 8 s) and prints one line:
 *
 *   mimprof-bench case=C operations=N seconds=S throughput=T cpu_seconds=C
 *     cpu_throughput=U samples=N recorded=N dropped=N profiler=0|1 interval=I
 *
 * operations: allocations (or reallocs) completed in the window; seconds:
 * the measured window; throughput = operations / seconds; cpu_seconds: the
 * CPU time of the whole process (every thread, the profiler's included)
 * over the window; cpu_throughput = operations / cpu_seconds, the steadier
 * figure on a shared machine (time spent descheduled does not count; cache
 * and memory-bandwidth interference still does). samples: every
 * sampling hit (recorded + dropped hits); recorded: mp_prof_stats
 * samples_taken; dropped: the dropped_* counters (registration, teardown,
 * overflow, live table). interval: MIMPROF_INTERVAL as seen (or -).
 *
 * `population` is the accuracy mode: it allocates a known population
 * (default 2,000,000 objects of 700 bytes, or a deterministic mix of sizes)
 * from one function placed in its own section, keeps every object live and
 * exits, so that exit-time heap profiles contain it. It prints the truth
 * (objects, bytes) and the run-time address range of that function
 * (pc_lo, pc_hi): a profile's stack whose frame lies in it belongs to the
 * population.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mimprof/profiling.h>

/* ---------------------------------------------------------------- helpers */

static atomic_int g_stop;
static volatile unsigned char g_sink;

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "mimprof-bench-workload: %s\n", what);
    exit(2);
}

static _Noreturn void die_oom(void) { die("allocation failed"); }

static uint64_t rng_next(uint64_t *s)
{
    /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(0x2545F4914F6CDD1D);
}

static uint64_t rng_seed(uint64_t seed, unsigned index)
{
    uint64_t s = seed * UINT64_C(0x9E3779B97F4A7C15) + index + 1;
    return s ? s : 1;
}

static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_seconds(void) { return clock_seconds(CLOCK_MONOTONIC); }

static int stopped(void) { return atomic_load_explicit(&g_stop, memory_order_relaxed); }

static void touch(unsigned char *p, size_t size)
{
    p[0] = (unsigned char)size;
    p[size - 1] = (unsigned char)(size >> 8);
}

/* 80% 16-256 B, 18% 257 B-4 KiB, 2% 4 KiB-64 KiB */
static size_t size_service(uint64_t r)
{
    unsigned pick = (unsigned)(r % 100);
    r >>= 8;
    if (pick < 80)
        return 16 + (size_t)(r % 241);
    if (pick < 98)
        return 257 + (size_t)(r % 3840);
    return 4097 + (size_t)(r % 61440);
}

/* 8 B - 256 KiB, power-of-two classes skewed towards the small ones */
static size_t size_skewed(uint64_t r)
{
    unsigned a = (unsigned)(r % 15), b = (unsigned)((r >> 8) % 15);
    unsigned e = 3 + (a < b ? a : b);
    return ((size_t)1 << e) + (size_t)((r >> 16) % ((uint64_t)1 << e));
}

/* ------------------------------------------------------------------ cases */

typedef struct worker {
    pthread_t thread;
    unsigned index;
    uint64_t seed;
    uint64_t ops;
    pthread_barrier_t *start;
    void *shared;
} worker;

enum {
    RING_SLOTS = 1024,
    DENSE_SLOTS = 16,
    LIVE_OBJECTS = 131072,
    CHURN_SLOTS = 4096,
    REALLOC_SLOTS = 256,
    BATCH = 64
};

static void *run_alloc(void *arg)
{
    worker *w = arg;
    uint64_t rng = rng_seed(w->seed, w->index);
    unsigned char **slots = calloc(RING_SLOTS, sizeof *slots);
    if (!slots)
        die_oom();
    unsigned next = 0;
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            size_t size = size_service(rng_next(&rng));
            unsigned char *p = malloc(size);
            if (!p)
                die_oom();
            touch(p, size);
            unsigned char *old = slots[next];
            if (old)
                g_sink ^= old[0];
            free(old);
            slots[next] = p;
            next = (next + 1) & (RING_SLOTS - 1);
        }
        w->ops += BATCH;
    }
    for (unsigned i = 0; i < RING_SLOTS; i++)
        free(slots[i]);
    free(slots);
    return NULL;
}

static void *run_dense(void *arg)
{
    worker *w = arg;
    const size_t size = 64 * 1024;
    unsigned char *slots[DENSE_SLOTS] = {0};
    unsigned next = 0;
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            unsigned char *p = malloc(size);
            if (!p)
                die_oom();
            touch(p, size);
            if (slots[next])
                g_sink ^= slots[next][0];
            free(slots[next]);
            slots[next] = p;
            next = (next + 1) % DENSE_SLOTS;
        }
        w->ops += BATCH;
    }
    for (unsigned i = 0; i < DENSE_SLOTS; i++)
        free(slots[i]);
    return NULL;
}

static size_t size_live(uint64_t r)
{
    /* 32 B - 4 KiB, skewed small; mean about 1 KiB */
    unsigned e = 5 + (unsigned)(r % 7);
    return ((size_t)1 << e) + (size_t)((r >> 8) % ((uint64_t)1 << e));
}

static void *run_live(void *arg)
{
    worker *w = arg;
    uint64_t rng = rng_seed(w->seed, w->index);
    unsigned char **live = malloc(LIVE_OBJECTS * sizeof *live);
    if (!live)
        die_oom();
    for (unsigned i = 0; i < LIVE_OBJECTS; i++) {
        size_t size = size_live(rng_next(&rng));
        live[i] = malloc(size);
        if (!live[i])
            die_oom();
        touch(live[i], size);
    }
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            uint64_t r = rng_next(&rng);
            unsigned i = (unsigned)(r % LIVE_OBJECTS);
            size_t size = size_live(r >> 20);
            g_sink ^= live[i][0];
            free(live[i]);
            live[i] = malloc(size);
            if (!live[i])
                die_oom();
            touch(live[i], size);
        }
        w->ops += BATCH;
    }
    for (unsigned i = 0; i < LIVE_OBJECTS; i++)
        free(live[i]);
    free(live);
    return NULL;
}

static unsigned char *alloc_mixed(uint64_t r, size_t size)
{
    unsigned kind = (unsigned)(r % 16);
    void *p = NULL;
    if (kind < 10) {
        p = malloc(size);
    } else if (kind < 13) {
        p = calloc(1, size);
    } else if (kind < 15) {
        if (posix_memalign(&p, 64, size) != 0)
            p = NULL;
    } else {
        p = aligned_alloc(256, (size + 255) & ~(size_t)255);
    }
    return p;
}

static void *run_churn(void *arg)
{
    worker *w = arg;
    uint64_t rng = rng_seed(w->seed, w->index);
    unsigned char **slots = calloc(CHURN_SLOTS, sizeof *slots);
    if (!slots)
        die_oom();
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            uint64_t r = rng_next(&rng);
            size_t size = size_skewed(r);
            unsigned i = (unsigned)((r >> 40) % CHURN_SLOTS);
            unsigned char *p = alloc_mixed(r >> 36, size);
            if (!p)
                die_oom();
            touch(p, size);
            if (slots[i])
                g_sink ^= slots[i][0];
            free(slots[i]);
            slots[i] = p;
        }
        w->ops += BATCH;
    }
    for (unsigned i = 0; i < CHURN_SLOTS; i++)
        free(slots[i]);
    free(slots);
    return NULL;
}

/* Single-producer single-consumer ring: the producer allocates, the
 * consumer frees, so every free is a cross-thread free. */
enum { SPSC_CAPACITY = 4096 };
typedef struct spsc {
    _Alignas(64) atomic_size_t head; /* consumer position */
    _Alignas(64) atomic_size_t tail; /* producer position */
    _Alignas(64) atomic_int producer_done;
    unsigned char *items[SPSC_CAPACITY];
} spsc;

static void *run_producer(void *arg)
{
    worker *w = arg;
    spsc *q = w->shared;
    uint64_t rng = rng_seed(w->seed, w->index);
    size_t tail = 0;
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            size_t size = 64 + (size_t)(rng_next(&rng) % 961);
            unsigned char *p = malloc(size);
            if (!p)
                die_oom();
            touch(p, size);
            unsigned spins = 0;
            while (tail - atomic_load_explicit(&q->head, memory_order_acquire) == SPSC_CAPACITY) {
                if (++spins % 64 == 0)
                    sched_yield();
            }
            q->items[tail % SPSC_CAPACITY] = p;
            atomic_store_explicit(&q->tail, ++tail, memory_order_release);
        }
        w->ops += BATCH;
    }
    atomic_store_explicit(&q->producer_done, 1, memory_order_release);
    return NULL;
}

static void *run_consumer(void *arg)
{
    worker *w = arg;
    spsc *q = w->shared;
    size_t head = 0;
    unsigned spins = 0;
    pthread_barrier_wait(w->start);
    for (;;) {
        size_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);
        if (head == tail) {
            if (atomic_load_explicit(&q->producer_done, memory_order_acquire) &&
                head == atomic_load_explicit(&q->tail, memory_order_acquire))
                break;
            if (++spins % 64 == 0)
                sched_yield();
            continue;
        }
        int counting = !stopped();
        while (head != tail) {
            unsigned char *p = q->items[head % SPSC_CAPACITY];
            g_sink ^= p[0];
            free(p);
            head++;
            if (counting)
                w->ops++;
        }
        atomic_store_explicit(&q->head, head, memory_order_release);
    }
    return NULL;
}

static void *run_realloc(void *arg)
{
    worker *w = arg;
    uint64_t rng = rng_seed(w->seed, w->index);
    unsigned char *buf[REALLOC_SLOTS] = {0};
    size_t len[REALLOC_SLOTS] = {0};
    const size_t cap = 256 * 1024;
    pthread_barrier_wait(w->start);
    while (!stopped()) {
        for (int k = 0; k < BATCH; k++) {
            uint64_t r = rng_next(&rng);
            unsigned i = (unsigned)(r % REALLOC_SLOTS);
            size_t size;
            if (len[i] == 0 || len[i] >= cap || (r >> 16) % 8 == 0)
                size = 16 + (size_t)((r >> 24) % 112);
            else
                size = len[i] + len[i] / 2 + (size_t)((r >> 24) % 64);
            unsigned char *p = realloc(buf[i], size);
            if (!p)
                die_oom();
            touch(p, size);
            buf[i] = p;
            len[i] = size;
        }
        w->ops += BATCH;
    }
    for (unsigned i = 0; i < REALLOC_SLOTS; i++)
        free(buf[i]);
    return NULL;
}

typedef struct bench_case {
    const char *name;
    unsigned workers;
    void *(*fn[2])(void *);
    unsigned counted; /* bitmask of workers whose ops count */
} bench_case;

static const bench_case k_cases[] = {
    {"alloc-1m-1w", 1, {run_alloc, NULL}, 1},
    {"alloc-1m-2w", 2, {run_alloc, run_alloc}, 3},
    {"alloc-1k-64k", 1, {run_dense, NULL}, 1},
    {"live-1m", 1, {run_live, NULL}, 1},
    {"mixed-churn", 1, {run_churn, NULL}, 1},
    {"producer-consumer", 2, {run_producer, run_consumer}, 2},
    {"realloc-heavy", 1, {run_realloc, NULL}, 1},
};

/* ------------------------------------------------------- profiler counters */

typedef struct counters {
    int present;
    uint64_t samples, recorded, dropped;
} counters;

static counters read_counters(void)
{
    counters c = {0, 0, 0, 0};
    void *sym = dlsym(RTLD_DEFAULT, "mp_prof_diagnostics");
    if (!sym)
        return c;
    void (*diagnostics)(mp_prof_stats *);
    memcpy(&diagnostics, &sym, sizeof diagnostics);
    mp_prof_stats st;
    memset(&st, 0, sizeof st);
    diagnostics(&st);
    c.present = 1;
    c.recorded = st.samples_taken;
    uint64_t dropped_hits =
        st.dropped_registration + st.dropped_teardown + st.dropped_overflow_full;
    c.dropped = dropped_hits + st.dropped_live_table_full;
    c.samples = st.samples_taken + dropped_hits;
    return c;
}

static const char *interval_env(void)
{
    const char *v = getenv("MIMPROF_INTERVAL");
    return v && *v && !strpbrk(v, " \t\n=") ? v : "-";
}

/* ---------------------------------------------------------------- running */

static int run_case(const bench_case *bc, double window, uint64_t seed)
{
    worker w[2];
    spsc *q = NULL;
    pthread_barrier_t start;
    if (strcmp(bc->name, "producer-consumer") == 0) {
        q = aligned_alloc(64, sizeof *q);
        if (!q)
            die_oom();
        memset(q, 0, sizeof *q);
    }
    if (pthread_barrier_init(&start, NULL, bc->workers + 1) != 0)
        die("pthread_barrier_init failed");
    for (unsigned i = 0; i < bc->workers; i++) {
        w[i] = (worker){.index = i, .seed = seed, .ops = 0, .start = &start, .shared = q};
        if (pthread_create(&w[i].thread, NULL, bc->fn[i], &w[i]) != 0)
            die("pthread_create failed");
    }
    pthread_barrier_wait(&start);
    double t0 = now_seconds();
    double c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    struct timespec ts = {(time_t)window, (long)((window - (double)(time_t)window) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    atomic_store_explicit(&g_stop, 1, memory_order_relaxed);
    uint64_t ops = 0;
    for (unsigned i = 0; i < bc->workers; i++) {
        pthread_join(w[i].thread, NULL);
        if (bc->counted & (1u << i))
            ops += w[i].ops;
    }
    double seconds = now_seconds() - t0;
    double cpu_seconds = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    pthread_barrier_destroy(&start);
    free(q);
    counters c = read_counters();
    printf("mimprof-bench case=%s operations=%llu seconds=%.6f throughput=%.1f cpu_seconds=%.6f "
           "cpu_throughput=%.1f samples=%llu recorded=%llu dropped=%llu profiler=%d interval=%s\n",
           bc->name, (unsigned long long)ops, seconds, (double)ops / seconds, cpu_seconds,
           cpu_seconds > 0 ? (double)ops / cpu_seconds : 0.0, (unsigned long long)c.samples,
           (unsigned long long)c.recorded, (unsigned long long)c.dropped, c.present,
           interval_env());
    return fflush(stdout) == 0 ? 0 : 2;
}

/* The population's allocation site: a function of its own section, so that
 * its run-time address range is known exactly (__start_/__stop_ symbols
 * the linker defines for a section named like a C identifier). */
#define POPULATION_SECTION "mimprof_bench_population"
extern const unsigned char __start_mimprof_bench_population[];
extern const unsigned char __stop_mimprof_bench_population[];

__attribute__((noinline, used, section(POPULATION_SECTION))) static void *
population_alloc(size_t size, void **slot)
{
    void *p = malloc(size);
    if (p)
        ((unsigned char *)p)[0] = 1;
    *slot = p; /* not a tail call: the return address stays in here */
    return p;
}

static int run_population(uint64_t objects, size_t size, int mixed, uint64_t seed)
{
    void **keep = malloc(objects * sizeof *keep);
    if (!keep)
        die_oom();
    uint64_t rng = rng_seed(seed, 99);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < objects; i++) {
        size_t s = mixed ? 16 + (size_t)(rng_next(&rng) % 16369) : size;
        if (!population_alloc(s, &keep[i]))
            die_oom();
        bytes += s;
    }
    counters c = read_counters();
    printf("mimprof-bench case=population objects=%llu bytes=%llu size=%s pc_lo=%p pc_hi=%p "
           "samples=%llu recorded=%llu dropped=%llu profiler=%d interval=%s\n",
           (unsigned long long)objects, (unsigned long long)bytes, mixed ? "mixed" : "fixed",
           (const void *)__start_mimprof_bench_population,
           (const void *)__stop_mimprof_bench_population, (unsigned long long)c.samples,
           (unsigned long long)c.recorded, (unsigned long long)c.dropped, c.present,
           interval_env());
    /* The population stays live: exit-time profiles must contain it. */
    g_sink ^= ((unsigned char *)keep[objects - 1])[0];
    return fflush(stdout) == 0 ? 0 : 2;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: mimprof-bench-workload CASE [--window SECONDS] [--seed N]\n"
                 "       mimprof-bench-workload population [--objects N] [--size BYTES | --mixed] "
                 "[--seed N]\n"
                 "       mimprof-bench-workload --list\n"
                 "cases:");
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        fprintf(out, " %s", k_cases[i].name);
    fprintf(out, "\n");
}

static uint64_t parse_u64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0) {
        fprintf(stderr, "mimprof-bench-workload: bad %s: %s\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
            printf("%s\n", k_cases[i].name);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    double window = 8.0;
    uint64_t seed = 1, objects = 2000000;
    size_t size = 700;
    int mixed = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--mixed") == 0) {
            mixed = 1;
            continue;
        }
        if (!v) {
            usage(stderr);
            return 2;
        }
        if (strcmp(a, "--window") == 0) {
            char *end;
            window = strtod(v, &end);
            if (end == v || *end || !(window > 0.0 && window < 86400.0))
                die("bad --window");
        } else if (strcmp(a, "--seed") == 0) {
            seed = parse_u64(v, "--seed");
        } else if (strcmp(a, "--objects") == 0) {
            objects = parse_u64(v, "--objects");
        } else if (strcmp(a, "--size") == 0) {
            size = (size_t)parse_u64(v, "--size");
        } else {
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (strcmp(argv[1], "population") == 0)
        return run_population(objects, size, mixed, seed);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if (strcmp(argv[1], k_cases[i].name) == 0)
            return run_case(&k_cases[i], window, seed);
    fprintf(stderr, "mimprof-bench-workload: unknown case %s\n", argv[1]);
    usage(stderr);
    return 2;
}
