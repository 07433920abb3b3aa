/* SPDX-License-Identifier: MIT */
/* The unbiased estimator, end to end through the sampling allocator and a
 * decoded pprof: the reference population, the size x interval grid over
 * several seeds, and fractional aggregation. */
#include "helpers.h"

#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

/* A provider that hands out unique addresses without memory, so the grid
 * can run millions of allocations quickly: the sampling decisions are the
 * same as over a real allocator. */
static uintptr_t null_next = (uintptr_t)1 << 40;
static inline const char *tnull_prov_name(void) { return "null"; }
static inline const char *tnull_prov_version(char *buf) { return strcpy(buf, "0"); }
static inline void *tnull_prov_alloc(size_t size, size_t align)
{
    (void)size;
    (void)align;
    null_next += 64;
    return (void *)null_next;
}
static inline void *tnull_prov_alloc_zeroed(size_t size, size_t align)
{
    return tnull_prov_alloc(size, align);
}
static inline void tnull_prov_dealloc(void *p, size_t size, size_t align)
{
    (void)p;
    (void)size;
    (void)align;
}
static inline void *tnull_prov_realloc(void *p, size_t o, size_t align, size_t n)
{
    (void)p;
    (void)o;
    return tnull_prov_alloc(n, align);
}
static inline size_t tnull_prov_usable_size(const void *p)
{
    (void)p;
    return 0;
}
MP_PROF_SAMPLING_ALLOCATOR_INLINE(tnull, tnull_prov);

__attribute__((noinline)) static void churn_768(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        void *p = tmi_alloc(768, 8);
        cr_assert_not_null(p);
        tmi_dealloc(p, 768, 8);
    }
}

/* 500,000 allocations of 768 B at a 1 KiB interval: p = 1 - e^-0.75 =
 * 0.5276, sigma of the object estimate = 0.13%. A per-event
 * integer-division estimator reports 394,752 objects (21% low); this one
 * must be within 1% for objects and bytes. */
Test(estimator, population_500k_768B_at_1KiB, .timeout = 120)
{
    const unsigned n = 500000;
    mp_prof_config c = test_config(1024, 42);
    tmi_dealloc(tmi_alloc(1, 8), 1, 8); /* observed */
    mp_profiler *p = test_start(&c);
    churn_768(n);
    tp_profile prof;
    test_report(p, &prof);
    double objects = (double)test_sum(&prof, "alloc_objects", 1);
    double bytes = (double)test_sum(&prof, "alloc_space", 1);
    cr_log_info("population: %.0f objects, %.0f bytes", objects, bytes);
    cr_assert(fabs(objects - n) <= 0.01 * n, "alloc_objects %.0f, expected %u within 1%%", objects,
              n);
    cr_assert(fabs(bytes - 768.0 * n) <= 0.01 * 768.0 * n, "alloc_space %.0f, expected %.0f", bytes,
              768.0 * n);
    /* and within the estimator's own 5 sigma */
    double sd = test_sigma_objects(n, test_p(768, 1024));
    cr_assert(fabs(objects - n) <= TEST_SIGMAS * sd + 1, "objects %.0f off by more than 5 sigma",
              objects);
    /* everything was freed */
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 0);
    /* period and types */
    cr_assert_eq(prof.period, 1024);
    cr_assert_str_eq(tp_str(&prof, prof.period_type.type), "space");
    cr_assert_str_eq(tp_str(&prof, prof.period_type.unit), "bytes");
    static const char *types[][2] = {{"alloc_objects", "count"},
                                     {"alloc_space", "bytes"},
                                     {"inuse_objects", "count"},
                                     {"inuse_space", "bytes"}};
    cr_assert_eq(prof.nsample_types, 4);
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(tp_str(&prof, prof.sample_types[i].type), types[i][0]);
        cr_assert_str_eq(tp_str(&prof, prof.sample_types[i].unit), types[i][1]);
    }
    tp_free(&prof);
    mp_profiler_free(p);
}

/* ------------------------------------------------------------------ grid */

__attribute__((noinline)) static void null_churn(size_t size, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        tnull_dealloc(tnull_alloc(size, 8), size, 8);
}

/* Sizes 16 B .. 8 MiB x intervals 1 KiB .. 1 MiB x 3 seeds. Each cell
 * allocates n blocks, chosen for about 10,000 expected samples (capped), and
 * checks the object and byte estimates against n within 5 standard
 * deviations of the estimator, sqrt(n (1-p)/p), plus one for the single
 * rounding. The mean of the cells' z-scores must also be near zero (a
 * small systematic bias shows there before any single cell fails). */
Test(estimator, grid_sizes_intervals_seeds, .timeout = 300)
{
    static const size_t sizes[] = {16, 256, 4096, 65536, 1 << 20, 8 << 20};
    static const size_t intervals[] = {1 << 10, 64 << 10, 512 << 10, 1 << 20};
    static const uint64_t seeds[] = {1, 2, 3};
    const double target = TEST_SANITIZED ? 2000 : 10000;
    const double cap = TEST_SANITIZED ? 2e6 : 16e6;
    double zsum = 0;
    int cells = 0;
    tnull_dealloc(tnull_alloc(1, 8), 1, 8);
    for (size_t ii = 0; ii < sizeof intervals / sizeof *intervals; ii++) {
        for (size_t si = 0; si < sizeof seeds / sizeof *seeds; si++) {
            mp_prof_config c = test_config(intervals[ii], seeds[si]);
            mp_profiler *p = test_start(&c);
            for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
                double R = (double)intervals[ii], S = (double)sizes[k];
                double pr = test_p(S, R);
                double n = ceil(target / pr);
                if (n > cap)
                    n = cap;
                if (n < 100)
                    n = 100;
                null_churn(sizes[k], (uint64_t)n);
                tp_profile prof;
                test_report(p, &prof);
                double objects = (double)test_sum(&prof, "alloc_objects", 1);
                double bytes = (double)test_sum(&prof, "alloc_space", 1);
                tp_free(&prof);
                double sd = test_sigma_objects(n, pr);
                double tol = TEST_SIGMAS * sd + 1;
                cr_assert(fabs(objects - n) <= tol,
                          "S=%zu R=%zu seed=%llu: objects %.0f, expected %.0f +- %.1f", sizes[k],
                          intervals[ii], (unsigned long long)seeds[si], objects, n, tol);
                cr_assert(fabs(bytes - S * n) <= TEST_SIGMAS * sd * S + 1,
                          "S=%zu R=%zu seed=%llu: bytes %.0f, expected %.0f", sizes[k],
                          intervals[ii], (unsigned long long)seeds[si], bytes, S * n);
                if (sd > 0.5) {
                    zsum += (objects - n) / sd;
                    cells++;
                }
            }
            mp_profiler_free(p);
        }
    }
    double zmean = zsum / cells;
    cr_log_info("grid: %d random cells, mean z = %.3f", cells, zmean);
    /* the mean of `cells` independent standard normals has sd 1/sqrt(cells) */
    cr_assert(fabs(zmean) <= TEST_SIGMAS / sqrt(cells), "systematic bias: mean z = %.3f over %d",
              zmean, cells);
}

/* --------------------------------------------------------- fractions kept */

__attribute__((noinline)) static void site_x(size_t size, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        tnull_dealloc(tnull_alloc(size, 8), size, 8);
}

__attribute__((noinline)) static void site_y(size_t size, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        tnull_dealloc(tnull_alloc(size, 8), size, 8);
}

/* All samples of one stack have weight w = 1/p with a large fractional
 * part; their sum must be rounded once: round(K w), not K round(w) or
 * K floor(w). K comes from the diagnostics (samples taken). */
Test(estimator, fractions_survive_aggregation, .timeout = 60)
{
    /* S/R = 1.2528 gives p = 0.7142..., w = 1.4001... */
    const size_t R = 1000, S = 1253;
    double w = 1.0 / test_p((double)S, (double)R);
    mp_prof_config c = test_config(R, 7);
    tnull_dealloc(tnull_alloc(1, 8), 1, 8);
    mp_profiler *p = test_start(&c);
    mp_prof_stats before, mid, after;
    mp_prof_diagnostics(&before);
    site_x(S, 700);
    mp_prof_diagnostics(&mid);
    site_y(S, 900);
    mp_prof_diagnostics(&after);
    double kx = (double)(mid.samples_taken - before.samples_taken);
    double ky = (double)(after.samples_taken - mid.samples_taken);
    cr_assert_gt(kx, 100);
    cr_assert_gt(ky, 100);
    tp_profile prof;
    test_report(p, &prof);
    int io = tp_type_index(&prof, "alloc_objects"), is = tp_type_index(&prof, "alloc_space");
    double got[2] = {0, 0}, gotb[2] = {0, 0};
    int stacks = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        const tp_sample *s = &prof.samples[i];
        if (tp_label_str(&prof, s, "__delta__") == NULL)
            continue;
        cr_assert_lt(stacks, 2, "more than two interval stacks");
        got[stacks] = (double)s->values[io];
        gotb[stacks] = (double)s->values[is];
        stacks++;
    }
    cr_assert_eq(stacks, 2);
    /* which is which does not matter: compare as sets */
    double ex = round(kx * w), ey = round(ky * w);
    cr_assert((got[0] == ex && got[1] == ey) || (got[0] == ey && got[1] == ex),
              "objects %.0f/%.0f, expected round(K w) = %.0f/%.0f (K %.0f/%.0f, w %.4f)", got[0],
              got[1], ex, ey, kx, ky, w);
    double bx = round(kx * w * (double)S), by = round(ky * w * (double)S);
    cr_assert(fabs(gotb[0] + gotb[1] - bx - by) <= 2, "bytes %.0f + %.0f vs %.0f + %.0f", gotb[0],
              gotb[1], bx, by);
    /* the biased alternatives differ by far more than the rounding */
    cr_assert_gt(fabs(ex - kx * round(w)), 50);
    tp_free(&prof);
    mp_profiler_free(p);
}

Test(estimator, weight_formula_limits, .timeout = 60)
{
    /* 1 - exp(-S/R) for S << R is about S/R: weight about R/S */
    double w = 1.0 / test_p(1, 1 << 20);
    cr_assert(fabs(w - (double)(1 << 20)) / (1 << 20) < 1e-5);
    /* S >> R: weight 1 */
    cr_assert_float_eq(1.0 / test_p(1 << 30, 1024), 1.0, 1e-12);
}
