/* SPDX-License-Identifier: MIT */
/* The two transcendental functions of the sampling path, computed inline
 * instead of through libm: a sample drew its next interval with log() and
 * weighed itself with expm1(), about 130 instructions and a dozen cache
 * misses in libm's tables per sample (BENCHMARKS.md, "One sample").
 *
 * Accuracy (tests/test_fastmath.c checks it against libm over the whole
 * input range): mp_neg_log_unit within 5e-14 relative (measured 3.4e-14),
 * mp_weight within 3e-14 (measured 1.8e-14, at x = 1/4). Both are far below what the estimator can see: a
 * countdown is floored to whole bytes and a weight is summed with others
 * of relative spread 1/sqrt(n). */
#ifndef MIMPROF_PROFILING_FASTMATH_H
#define MIMPROF_PROFILING_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* -log(k * 2^-53) for k in [1, 2^53]: the exponential draw's -log(u) for
 * u = k / 2^53 in (0, 1], from the integer itself. k = 2^e * m with m in
 * [sqrt(1/2), sqrt(2)); log(m) = 2 atanh(f), f = (m - 1) / (m + 1),
 * |f| < 0.1716, by its odd series to f^15 (the first term left out is
 * below 4e-14 of the sum). No cancellation: (53 - e) ln 2 is 0 when m is
 * near 1 and at least ln 2 > 2 |log m| otherwise. */
static inline double mp_neg_log_unit(uint64_t k)
{
    double x = (double)k; /* exact: k <= 2^53 */
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    /* top of the mantissa above sqrt(2) - 1: take the next exponent */
    uint64_t adj = (bits & 0x000fffffffffffffull) > 0x6a09e667f3bcdull;
    int e = (int)((bits >> 52) & 0x7ff) - 1023 + (int)adj;
    bits = (bits & 0x000fffffffffffffull) | (uint64_t)(1023 - (int)adj) << 52;
    double m;
    memcpy(&m, &bits, sizeof m);
    double f = (m - 1.0) / (m + 1.0);
    double f2 = f * f;
    double s = 1.0 / 15;
    s = s * f2 + 1.0 / 13;
    s = s * f2 + 1.0 / 11;
    s = s * f2 + 1.0 / 9;
    s = s * f2 + 1.0 / 7;
    s = s * f2 + 1.0 / 5;
    s = s * f2 + 1.0 / 3;
    s = s * f2 + 1.0;
    const double ln2_hi = 6.93147180369123816490e-01; /* fdlibm's split of ln 2 */
    const double ln2_lo = 1.90821492927058770002e-10;
    double n = (double)(53 - e);
    return (n * ln2_hi - 2.0 * f * s) + n * ln2_lo;
}

/* The estimator's weight 1/p, p = 1 - exp(-x), x = S/R > 0. For x <= 1/4
 * the Laurent series 1/x + 1/2 + x/12 - x^3/720 + x^5/30240 - x^7/1209600
 * (the next term, x^9/47900160, is below 2e-14 of the sum); above, libm's
 * expm1 (a block of at least a quarter of the interval: rare) up to 38,
 * and 1.0 from there on. */
static inline double mp_weight(double x)
{
    /* x >= 38: exp(-x) < 3.2e-17, below half an ulp of 1 (2^-54), so
     * expm1(-x) rounds to -1 and the weight is exactly 1.0 (what libm's
     * path returns, without its call) */
    if (x >= 38.0)
        return 1.0;
    if (!(x <= 0.25))
        return x > 0 ? -1.0 / expm1(-x) : 0.0;
    if (!(x > 0))
        return 0.0;
    double x2 = x * x;
    double t = -1.0 / 1209600;
    t = t * x2 + 1.0 / 30240;
    t = t * x2 - 1.0 / 720;
    t = t * x2 + 1.0 / 12;
    return 1.0 / x + 0.5 + x * t;
}

#endif
