/* The shaping of a report before upload (src/fit.c): no `__delta__`
 * sample label, one sample per stack, and parts within the server's
 * limits that hold every sample exactly once. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "harness.h"

#define WIDE_BITS 16 /* 65,536 stacks */

static void totals(const tp_profile *p, int64_t out[4])
{
    for (int t = 0; t < 4; t++)
        out[t] = tp_total(p, t);
}

Test(fit, delta_label_removed_and_stacks_merged)
{
    tp_heap_values v;
    fixed_values(0, &v);
    size_t len;
    uint8_t *in = tp_build_heap(&v, 1700000000000000000, 10000000000, true, &len);
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(in, len, 16000, 4 << 20, &parts, err, sizeof err), MP_PYRO_OK, "%s",
                 err);
    cr_assert_eq(parts.n, 1);
    tp_profile want, got;
    cr_assert(tp_decode(in, len, &want));
    cr_assert(tp_decode(parts.v[0].pprof, parts.v[0].len, &got));
    cr_expect_eq(want.nsamples, 4, "interval + live sample per stack in the report");
    cr_expect_eq(got.nsamples, 2);
    for (size_t i = 0; i < got.nsamples; i++)
        cr_expect_eq(got.samples[i].label_key, 0);
    int64_t a[4], b[4];
    totals(&want, a);
    totals(&got, b);
    cr_expect_arr_eq(a, b, sizeof a);
    cr_expect_eq(got.time_nanos, want.time_nanos);
    cr_expect_eq(got.nlocations, want.nlocations);
    tp_free(&want);
    tp_free(&got);
    mp_pyro_parts_free(&parts);
    free(in);
}

/* The large heap: 65,536 live stacks, 131,072 samples, 4.5 MB. */
Test(fit, wide_report_split_within_limits_totals_exact, .timeout = 120)
{
    size_t len;
    uint8_t *in = tp_build_wide(WIDE_BITS, 4096, 1700000000000000000, &len);
    cr_expect_gt(len, (size_t)4 << 20, "the report alone exceeds the 4 MiB limit (%zu)", len);
    const size_t max_bytes = (2u << 20) - 1024;
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(in, len, 16000, max_bytes, &parts, err, sizeof err), MP_PYRO_OK, "%s",
                 err);
    cr_expect_geq(parts.n, 5, "65,536 stacks need 5 parts of at most 16,000");
    size_t samples = 0;
    int64_t sum[4] = {0};
    char *seen = calloc((size_t)1 << WIDE_BITS, 1);
    for (size_t k = 0; k < parts.n; k++) {
        cr_expect_leq(parts.v[k].len, max_bytes, "part %zu: %zu bytes", k, parts.v[k].len);
        cr_expect_leq(parts.v[k].samples, 16000);
        tp_profile p;
        cr_assert(tp_decode(parts.v[k].pprof, parts.v[k].len, &p));
        cr_expect_eq(p.nsamples, parts.v[k].samples);
        for (size_t i = 0; i < p.nsamples; i++) {
            /* the stack's counter, from its bit locations (3 + 2i + b) */
            size_t c = 0;
            for (size_t j = 1; j + 1 < p.samples[i].nlocs; j++)
                c |= (size_t)((p.samples[i].locs[j] - 3) & 1) << ((p.samples[i].locs[j] - 3) / 2);
            cr_expect_eq(seen[c], 0, "stack %zu sent twice", c);
            seen[c] = 1;
            cr_expect_eq(p.samples[i].label_key, 0);
            /* every location a sample names is in its part */
            for (size_t j = 0; j < p.samples[i].nlocs; j++) {
                bool found = false;
                for (size_t l = 0; l < p.nlocations && !found; l++)
                    found = p.locations[l].id == p.samples[i].locs[j];
                cr_assert(found, "part %zu lacks location %llu", k,
                          (unsigned long long)p.samples[i].locs[j]);
            }
        }
        int64_t t[4];
        totals(&p, t);
        for (int i = 0; i < 4; i++)
            sum[i] += t[i];
        samples += p.nsamples;
        tp_free(&p);
    }
    cr_expect_eq(samples, (size_t)1 << WIDE_BITS);
    const int64_t n = (int64_t)1 << WIDE_BITS;
    int64_t want[4] = {n, n * 4096, n, n * 4096};
    cr_expect_arr_eq(sum, want, sizeof sum, "totals exact");
    free(seen);
    mp_pyro_parts_free(&parts);
    free(in);
}

Test(fit, refusals)
{
    mp_pyro_parts parts;
    char err[256] = "";
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    cr_expect_eq(mp_pyro_fit(junk, sizeof junk, 0, 0, &parts, err, sizeof err),
                 MP_PYRO_E_INVALID_ARGUMENT);
    cr_expect(strstr(err, "not a pprof"), "%s", err);
    tp_heap_values v;
    fixed_values(0, &v);
    size_t len;
    uint8_t *in = tp_build_heap(&v, 1700000000000000000, 10000000000, true, &len);
    cr_expect_eq(mp_pyro_fit(in, len, 0, 64, &parts, err, sizeof err), MP_PYRO_E_INVALID_ARGUMENT);
    cr_expect(strstr(err, "one stack"), "%s", err);
    cr_expect_eq(mp_pyro_fit(in, len, 1, 0, &parts, err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(parts.n, 2, "one sample per part");
    mp_pyro_parts_free(&parts);
    free(in);
}
