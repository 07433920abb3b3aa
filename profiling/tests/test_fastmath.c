/* SPDX-License-Identifier: MIT */
/* The sampling path's inline logarithm and estimator weight
 * (src/fastmath.h) against libm, over their whole input ranges: every
 * power of two and its neighbours, and a million pseudo-random inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "fastmath.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Error of -log(k 2^-53) in units of the bound, 5e-14 relative + 4e-16
 * absolute (fastmath.h): at most 1 passes. */
static double log_err(uint64_t k)
{
    double want = -log((double)k * 0x1p-53);
    double got = mp_neg_log_unit(k);
    return fabs(got - want) / (5e-14 * want + 4e-16);
}

static void worst_of(uint64_t k, double *worst, uint64_t *at)
{
    double r = log_err(k);
    if (r > *worst)
        *worst = r, *at = k;
}

Test(fastmath, neg_log_unit_matches_libm)
{
    double worst = 0;
    uint64_t at = 0;
    for (int e = 0; e <= 53; e++) {
        uint64_t base = (uint64_t)1 << e;
        for (int d = -3; d <= 3; d++) {
            uint64_t k = base + (uint64_t)(int64_t)d;
            if (k >= 1 && k <= ((uint64_t)1 << 53))
                worst_of(k, &worst, &at);
        }
        /* every table entry's edges: the mantissa's top eight bits change */
        for (uint64_t j = 0; e >= 8 && j < 256; j++) {
            uint64_t edge = base + (j << (e - 8));
            for (uint64_t k = edge > 2 ? edge - 2 : 1; k <= edge + 2 && k <= ((uint64_t)1 << 53);
                 k++)
                worst_of(k, &worst, &at);
        }
    }
    /* u just below 1, where the two terms nearly cancel */
    for (uint64_t d = 0; d < 100000; d++)
        worst_of(((uint64_t)1 << 53) - d, &worst, &at);
    uint64_t s = 7;
    for (int i = 0; i < 1000000; i++)
        worst_of((next(&s) >> 11) + 1, &worst, &at); /* the draw's own input */
    cr_log_info("mp_neg_log_unit: worst error %.3g of the bound at k = %llu", worst,
                (unsigned long long)at);
    cr_assert(worst <= 1, "error %.3g of the bound at k = %llu", worst, (unsigned long long)at);
    /* u = 1 gives a countdown of 0 even at the largest mean (the draw's
     * conversion truncates toward 0) */
    cr_assert_eq((int64_t)(mp_neg_log_unit((uint64_t)1 << 53) * 0x1p40), 0);
}

/* The table's entries are what fastmath.h says they are: inv the double
 * nearest 1/c (IEEE division rounds once), log within one ulp of
 * log(1/inv) (libm's log is within one ulp). */
Test(fastmath, log_table_entries)
{
    for (int j = 0; j < 256; j++) {
        double c = 1.0 + (2.0 * j + 1.0) / 512.0; /* exact */
        cr_assert_eq(mp_log_table_[j].inv, 1.0 / c, "entry %d: inv", j);
        double want = -log(mp_log_table_[j].inv);
        double ulp = nextafter(want, INFINITY) - want;
        cr_assert_leq(fabs(mp_log_table_[j].log - want), ulp, "entry %d: log", j);
    }
}

static double weight_ref(double x) { return -1.0 / expm1(-x); }

Test(fastmath, weight_matches_libm)
{
    double worst = 0, at = 0;
    uint64_t s = 11;
    for (int i = 0; i < 1000000; i++) {
        /* x = S/R log-uniform over [2^-40, 2^6]: tiny blocks to blocks many intervals long */
        double x = exp2(-40.0 + 46.0 * (double)(next(&s) >> 11) * 0x1p-53);
        double r = fabs(mp_weight(x) - weight_ref(x)) / weight_ref(x);
        if (r > worst)
            worst = r, at = x;
    }
    const double edges[] = {0.25, nextafter(0.25, 0), nextafter(0.25, 1), 1e-300, 0x1p-1074, 700};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        double r = fabs(mp_weight(edges[i]) - weight_ref(edges[i])) / weight_ref(edges[i]);
        if (r > worst)
            worst = r, at = edges[i];
    }
    cr_log_info("mp_weight: worst relative error %.3g at x = %.17g", worst, at);
    cr_assert(worst <= 3e-14, "relative error %.3g at x = %.17g", worst, at);
    cr_assert_eq(mp_weight(0), 0.0, "p = 0: no weight");
    /* from x = 38 on the weight is 1.0 without libm: exactly libm's value */
    for (double x = 30.0; x <= 1e6; x = x < 64 ? nextafter(x + 0.01, 1e9) : x * 1.5)
        cr_assert_eq(mp_weight(x), weight_ref(x), "x = %.17g", x);
    cr_assert_eq(mp_weight(nextafter(38.0, 0)), weight_ref(nextafter(38.0, 0)));
    cr_assert_eq(mp_weight(38.0), 1.0);
    cr_assert_eq(weight_ref(38.0), 1.0, "libm's weight at 38 is 1.0 too");
}
