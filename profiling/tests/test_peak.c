/* SPDX-License-Identifier: MIT */
/* The window's peak (mp_profiler_report_peak): a phased program whose
 * spike the peak profile holds and the report at its end does not, the
 * documented step checked exactly with every block sampled, windows, and
 * the peak set's consistency with the estimate under 8 threads. */
#include "helpers.h"

#include <dlfcn.h>
#include <stdatomic.h>

#include <mimprof/sys.h>

/* A provider that hands out unique addresses without memory (as in
 * test_estimator.c), thread-safe: 160 MiB phases cost no memory. */
static _Atomic uintptr_t null_next = (uintptr_t)1 << 40;
static inline const char *tpk_prov_name(void) { return "null"; }
static inline const char *tpk_prov_version(char *buf) { return strcpy(buf, "0"); }
static inline void *tpk_prov_alloc(size_t size, size_t align)
{
    (void)size;
    (void)align;
    return (void *)(atomic_fetch_add(&null_next, 64) + 64);
}
static inline void *tpk_prov_alloc_zeroed(size_t size, size_t align)
{
    return tpk_prov_alloc(size, align);
}
static inline void tpk_prov_dealloc(void *p, size_t size, size_t align)
{
    (void)p;
    (void)size;
    (void)align;
}
static inline void *tpk_prov_realloc(void *p, size_t o, size_t align, size_t n)
{
    (void)p;
    (void)o;
    return tpk_prov_alloc(n, align);
}
static inline size_t tpk_prov_usable_size(const void *p)
{
    (void)p;
    return 0;
}
MP_PROF_SAMPLING_ALLOCATOR_INLINE(tpk, tpk_prov);

static void observed(void) { tpk_dealloc(tpk_alloc(1, 8), 1, 8); }

/* The three sites of the phased program (exported: dladdr names them). */
void peak_keep(void **v, size_t n, size_t size);
void peak_spike(void **v, size_t n, size_t size);
void peak_late(void **v, size_t n, size_t size);
__attribute__((noinline)) void peak_keep(void **v, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        v[i] = tpk_alloc(size, 8);
    TEST_NO_TAIL(v);
}
__attribute__((noinline)) void peak_spike(void **v, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        v[i] = tpk_alloc(size, 8);
    TEST_NO_TAIL(v);
}
__attribute__((noinline)) void peak_late(void **v, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        v[i] = tpk_alloc(size, 8);
    TEST_NO_TAIL(v);
}

static void free_all(void **v, size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        tpk_dealloc(v[i], size, 8);
}

static void peak(mp_profiler *p, tp_profile *out, mp_prof_peak_info *info)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report_peak(p, &buf, &len, info);
    cr_assert_eq(st, MP_PROF_OK, "peak: %s", mp_prof_strerror(st));
    cr_assert(tp_decode(buf, len, out), "the peak profile does not decode as pprof");
    mp_prof_buffer_free(buf);
}

/* inuse_space of the samples whose innermost frame is in function `name`
 * (NULL: all). */
static double site_bytes(const tp_profile *prof, const char *name)
{
    int k = tp_type_index(prof, "inuse_space");
    cr_assert_geq(k, 0, "no inuse_space");
    double sum = 0;
    for (size_t i = 0; i < prof->nsamples; i++) {
        Dl_info dl;
        uint64_t leaf = tp_leaf_address(prof, &prof->samples[i]);
        if (name == NULL || (dladdr((void *)(uintptr_t)(leaf - 1), &dl) && dl.dli_sname != NULL &&
                             strcmp(dl.dli_sname, name) == 0))
            sum += (double)prof->samples[i].values[k];
    }
    return sum;
}

/* Standard deviation of the byte estimate of n live blocks of `size`
 * bytes at interval R: size x the object estimate's, sqrt(n (1-p)/p). */
static double sigma_bytes(double n, double size, double interval)
{
    return size * test_sigma_objects(n, test_p(size, interval));
}

#define MIB  ((size_t)1 << 20)
#define STEP (1.0 / 64.0) /* MP_PEAK_STEP_SHIFT: a mark is within 1/64 below the maximum */

/* 40 MiB kept, a 120 MiB spike allocated and freed, 20 MiB at the end,
 * 4 KiB blocks, 16 KiB interval.
 *
 * Tolerances, derived: the estimate of the live heap is a sum of
 * independent per-block terms (each block is sampled or not), so along
 * the program it is a martingale around the true live bytes, with the
 * variance of the in-use estimator, sigma_bytes(n) for the n blocks live
 * at the end of the spike. The peak is the maximum of that path: by the
 * reflection principle the chance that the path's deviation ever exceeds
 * k sigma is at most twice the chance that its final value does, so
 * TEST_SIGMAS (5) still bounds a fresh seed's false failure below 1e-6.
 * Below the true peak the mark may also lag by the step (1/64 of it). */
Test(peak, phased_program_peak_holds_the_spike, .timeout = 120)
{
    const size_t S = 4096, R = 16384;
    const size_t n_keep = 40 * MIB / S, n_spike = 120 * MIB / S, n_late = 20 * MIB / S;
    void **keep = calloc(n_keep, sizeof *keep), **spike = calloc(n_spike, sizeof *spike),
         **late = calloc(n_late, sizeof *late);
    cr_assert(keep && spike && late);
    observed();
    mp_prof_config c = test_config(R, 1818);
    c.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    mp_profiler *p = test_start(&c);

    peak_keep(keep, n_keep, S);
    peak_spike(spike, n_spike, S);
    free_all(spike, n_spike, S);
    peak_late(late, n_late, S);

    tp_profile exit_report, pk;
    test_report(p, &exit_report);
    mp_prof_peak_info info;
    peak(p, &pk, &info);

    double true_peak = (double)(n_keep + n_spike) * (double)S;
    double sd_peak = sigma_bytes((double)(n_keep + n_spike), (double)S, (double)R);
    double lo = true_peak * (1.0 - STEP) - TEST_SIGMAS * sd_peak,
           hi = true_peak + TEST_SIGMAS * sd_peak;
    cr_log_info("peak %llu bytes (true %.0f, allowed %.0f..%.0f), %llu samples",
                (unsigned long long)info.bytes, true_peak, lo, hi,
                (unsigned long long)info.samples);
    cr_assert((double)info.bytes >= lo && (double)info.bytes <= hi, "peak %llu outside %.0f..%.0f",
              (unsigned long long)info.bytes, lo, hi);
    /* The profile is the set of that instant: it sums to the estimate
     * (values are rounded once per pprof sample). */
    double total = site_bytes(&pk, NULL);
    cr_assert(fabs(total - (double)info.bytes) <= (double)pk.nsamples + 1,
              "peak profile sums to %.0f, the estimate was %llu", total,
              (unsigned long long)info.bytes);
    /* It holds the spike, and nothing of what came after it. */
    double spike_b = site_bytes(&pk, "peak_spike");
    double sd_spike = sigma_bytes((double)n_spike, (double)S, (double)R);
    double spike_true = (double)(n_spike * S);
    cr_assert(spike_b >= spike_true - STEP * true_peak - TEST_SIGMAS * sd_spike &&
                  spike_b <= spike_true + TEST_SIGMAS * sd_spike,
              "peak profile: spike site %.0f, expected %.0f", spike_b, spike_true);
    cr_assert_eq(site_bytes(&pk, "peak_late"), 0, "allocated after the peak, yet in it");
    cr_assert(site_bytes(&pk, "peak_keep") > 0);
    /* Sample types: in-use only. */
    cr_assert_eq(pk.nsample_types, 2);
    cr_assert_str_eq(tp_str(&pk, pk.sample_types[0].type), "inuse_objects");
    cr_assert_str_eq(tp_str(&pk, pk.sample_types[1].type), "inuse_space");
    cr_assert(info.time_nanos >= info.window_start_nanos &&
              info.time_nanos <= info.window_end_nanos);
    cr_assert(!info.incomplete);

    /* The report at the end does not hold the spike: 60 MiB live. */
    double end_true = (double)((n_keep + n_late) * S);
    double end_b = site_bytes(&exit_report, NULL);
    double sd_end = sigma_bytes((double)(n_keep + n_late), (double)S, (double)R);
    cr_assert(fabs(end_b - end_true) <= TEST_SIGMAS * sd_end, "end %.0f, expected %.0f", end_b,
              end_true);
    cr_assert_eq(site_bytes(&exit_report, "peak_spike"), 0);
    cr_assert(end_b < lo, "the end report is within the peak's tolerance");

    tp_free(&exit_report);
    tp_free(&pk);
    free_all(keep, n_keep, S);
    free_all(late, n_late, S);
    mp_profiler_free(p);
    free(keep);
    free(spike);
    free(late);
}

/* Interval 1 byte: every block is sampled with weight 1, so the estimate
 * is exact and the step is checked exactly: the mark is the first value
 * above the previous mark + 1/64 of it, so at most 1/65 of the maximum
 * below it. */
Test(peak, step_is_exact_with_every_block_sampled, .timeout = 60)
{
    enum { N = 1000, SZ = 1000 };
    static void *v[N];
    observed();
    mp_prof_config c = test_config(1, 7);
    mp_profiler *p = test_start(&c);

    tp_profile pk;
    mp_prof_peak_info info;
    peak(p, &pk, &info); /* before the first report: empty */
    cr_assert_eq(pk.nsamples, 0);
    cr_assert_eq(info.bytes, 0);
    tp_free(&pk);

    peak_keep(v, N, SZ);     /* 1,000,000 bytes live: the maximum */
    free_all(v, N / 2, SZ);  /* freed after the mark: still in the peak set */
    peak_late(v, N / 5, SZ); /* 700,000 live */
    tp_profile r;
    test_report(p, &r);
    cr_assert_eq(site_bytes(&r, NULL), 700000);
    tp_free(&r);
    peak(p, &pk, &info);
    cr_assert(info.bytes <= (uint64_t)N * SZ && (double)info.bytes >= N * SZ * 64.0 / 65.0,
              "peak %llu", (unsigned long long)info.bytes);
    cr_assert_eq(site_bytes(&pk, NULL), (double)info.bytes);
    cr_assert_eq(site_bytes(&pk, "peak_late"), 0);
    cr_assert_eq(info.samples, info.bytes / SZ);
    tp_free(&pk);

    /* The next window starts with the live set at that report: its peak is
     * never below it, though nothing grows. */
    free_all(v, N / 5, SZ);
    test_report(p, &r);
    tp_free(&r);
    peak(p, &pk, &info);
    cr_assert_eq(info.bytes, 700000);
    cr_assert_eq(site_bytes(&pk, "peak_late"), 200000);
    tp_free(&pk);
    free_all(v + N / 2, N / 2, SZ);
    mp_profiler_free(p);
}

Test(peak, stopped_session_is_inactive, .timeout = 60)
{
    observed();
    mp_prof_config c = test_config(4096, 3);
    mp_profiler *p = test_start(&c);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(mp_profiler_report_peak(p, &buf, NULL, NULL), MP_PROF_E_INVALID_CONFIG);
    mp_profiler_stop(p);
    cr_assert_eq(mp_profiler_report_peak(p, &buf, &len, NULL), MP_PROF_E_INACTIVE);
    mp_profiler_free(p);
}

/* ------------------------------------------------------- free(NULL) */

/* A provider whose one block sits at address 8: in the filter slot of
 * NULL (page 0, granule 0), as any sampled block 16 MiB-aligned is; the
 * rest is the null provider's. */
static inline void *tfx_prov_alloc(size_t size, size_t align)
{
    (void)size;
    (void)align;
    return (void *)(uintptr_t)8;
}
static inline void *tfx_prov_alloc_zeroed(size_t size, size_t align)
{
    return tfx_prov_alloc(size, align);
}
#define tfx_prov_name        tpk_prov_name
#define tfx_prov_version     tpk_prov_version
#define tfx_prov_dealloc     tpk_prov_dealloc
#define tfx_prov_realloc     tpk_prov_realloc
#define tfx_prov_usable_size tpk_prov_usable_size
MP_PROF_SAMPLING_ALLOCATOR_INLINE(tfx, tfx_prov);

static uint64_t live_samples(void)
{
    mp_prof_stats st;
    mp_prof_diagnostics(&st);
    return st.live_samples;
}

/* Regression: free(NULL) while a sampled block shares NULL's filter slot
 * reached the live table, whose probe took the empty slot it met for
 * NULL's entry and "removed" it: the stripe's count and the filter bit of
 * the real block went (its own free was then never seen, and it stayed
 * live forever), and the peak counted a block that was never there. */
Test(peak, free_of_null_leaves_the_live_table_alone, .timeout = 60)
{
    observed();
    tfx_dealloc(tfx_alloc(1, 8), 1, 8);
    mp_prof_config c = test_config(1, 5);
    mp_profiler *p = test_start(&c);
    void *b = tfx_alloc(4096, 8); /* sampled (interval 1 byte) */
    cr_assert_eq((uintptr_t)b, 8);
    cr_assert_eq(live_samples(), 1);
    tfx_dealloc(NULL, 0, 8);
    cr_assert_eq(live_samples(), 1, "free(NULL) removed an entry");
    tfx_dealloc(b, 4096, 8);
    cr_assert_eq(live_samples(), 0, "the block's own free was not seen");
    tp_profile r, pk;
    test_report(p, &r);
    cr_assert_eq(site_bytes(&r, NULL), 0);
    mp_prof_peak_info info;
    peak(p, &pk, &info);
    cr_assert_eq(site_bytes(&pk, NULL), (double)info.bytes);
    cr_assert_eq(info.bytes, 4096);
    tp_free(&r);
    tp_free(&pk);
    mp_profiler_free(p);
}

/* A sampled block whose free was never seen (freed behind the hooks' back)
 * and whose address comes back sampled: the new block's entry replaces
 * the stale one in place (one live sample, the estimate the new block's),
 * and the peak still holds the old block, which was live at the mark. */
Test(peak, a_stale_entry_is_replaced_in_place, .timeout = 60)
{
    observed();
    tfx_dealloc(tfx_alloc(1, 8), 1, 8);
    mp_prof_config c = test_config(1, 6);
    mp_profiler *p = test_start(&c);
    void *a = tfx_alloc(4096, 8); /* sampled (interval 1 byte), at 8 */
    void *b = tfx_alloc(100, 8);  /* at 8 again: a's free was not seen */
    cr_assert_eq(a, b);
    cr_assert_eq(live_samples(), 1);
    tp_profile r, pk;
    test_report(p, &r);
    cr_assert_eq(site_bytes(&r, NULL), 100, "the stale entry stayed");
    tp_free(&r);
    mp_prof_peak_info info;
    peak(p, &pk, &info);
    cr_assert_eq(info.bytes, 4096);
    cr_assert_eq(site_bytes(&pk, NULL), 4096);
    tp_free(&pk);
    tfx_dealloc(b, 100, 8);
    cr_assert_eq(live_samples(), 0);
    test_report(p, &r);
    cr_assert_eq(site_bytes(&r, NULL), 0);
    tp_free(&r);
    mp_profiler_free(p);
}

/* ------------------------------------------------------------ 8 threads */

enum { THREADS = 8 };
static atomic_bool g_stop;

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Allocates a batch of mixed sizes and frees it in another order, over
 * and over: the live estimate rises and falls while reports close
 * windows. */
static void *churn(void *arg)
{
    uint64_t rng = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
    enum { BATCH = 256 };
    void *v[BATCH];
    size_t sz[BATCH];
    while (!atomic_load(&g_stop)) {
        size_t n = 1 + xorshift(&rng) % BATCH;
        for (size_t i = 0; i < n; i++) {
            sz[i] = 16 + xorshift(&rng) % 16384;
            v[i] = tpk_alloc(sz[i], 8);
        }
        for (size_t i = 0; i < n; i++) {
            size_t k = (i * 7 + 3) % n;
            if (v[k] != NULL)
                tpk_dealloc(v[k], sz[k], 8);
            v[k] = NULL;
        }
        for (size_t i = 0; i < n; i++)
            if (v[i] != NULL)
                tpk_dealloc(v[i], sz[i], 8);
    }
    return NULL;
}

/* Each window's peak profile is one instant's live set, whatever the
 * threads did while it was rebuilt: it sums to the estimate recorded at
 * the mark (only values are rounded, once per pprof sample). */
Test(peak, consistent_under_8_threads, .timeout = 300)
{
    observed();
    mp_prof_config c = test_config(4096, 88);
    mp_profiler *p = test_start(&c);
    atomic_store(&g_stop, false);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    const int rounds = TEST_SANITIZED ? 20 : 100;
    uint64_t nonzero = 0;
    for (int r = 0; r < rounds; r++) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
        tp_profile rep, pk;
        test_report(p, &rep);
        mp_prof_peak_info info;
        peak(p, &pk, &info);
        double total = site_bytes(&pk, NULL);
        cr_assert(fabs(total - (double)info.bytes) <= (double)pk.nsamples / 2.0 + 1.0,
                  "round %d: peak profile sums to %.0f, the mark was %llu", r, total,
                  (unsigned long long)info.bytes);
        cr_assert(!info.incomplete);
        nonzero += info.bytes != 0;
        tp_free(&rep);
        tp_free(&pk);
    }
    atomic_store(&g_stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert_gt(nonzero, 0, "no window saw a live heap");
    mp_profiler_free(p);
}
