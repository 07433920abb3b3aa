/* SPDX-License-Identifier: MIT */
/* The shaping of a report before upload (src/fit.c): no `__delta__`
 * sample label, one sample per stack, and parts within the server's
 * limits that hold every sample exactly once. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "harness.h"
#include "profile.pb-c.h"

#define WIDE_BITS 16 /* 65,536 stacks */

static void totals(const tp_profile *p, int64_t out[4])
{
    for (int t = 0; t < 4; t++)
        out[t] = tp_total_at(p, t);
}

Test(fit, delta_label_removed_and_stacks_merged)
{
    tp_heap_values v;
    fixed_values(0, &v);
    size_t len;
    uint8_t *in = tp_build_heap(&v, 1700000000000000000, 10000000000, true, &len);
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(in, len, 16000, 4 << 20, NULL, &parts, err, sizeof err), MP_PYRO_OK,
                 "%s", err);
    cr_assert_eq(parts.n, 1);
    tp_profile want, got;
    cr_assert(tp_decode(in, len, &want));
    cr_assert(tp_decode(parts.v[0].pprof, parts.v[0].len, &got));
    cr_expect_eq(want.nsamples, 4, "interval + live sample per stack in the report");
    cr_expect_eq(got.nsamples, 2);
    for (size_t i = 0; i < got.nsamples; i++)
        cr_expect_eq(got.samples[i].nlabels, 0);
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
    cr_assert_eq(mp_pyro_fit(in, len, 16000, max_bytes, NULL, &parts, err, sizeof err), MP_PYRO_OK,
                 "%s", err);
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
            for (size_t j = 1; j + 1 < p.samples[i].nlocations; j++)
                c |= (size_t)((p.samples[i].location_ids[j] - 3) & 1)
                     << ((p.samples[i].location_ids[j] - 3) / 2);
            cr_expect_eq(seen[c], 0, "stack %zu sent twice", c);
            seen[c] = 1;
            cr_expect_eq(p.samples[i].nlabels, 0);
            /* every location a sample names is in its part */
            for (size_t j = 0; j < p.samples[i].nlocations; j++) {
                bool found = false;
                for (size_t l = 0; l < p.nlocations && !found; l++)
                    found = p.locations[l].id == p.samples[i].location_ids[j];
                cr_assert(found, "part %zu lacks location %llu", k,
                          (unsigned long long)p.samples[i].location_ids[j]);
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
    cr_expect_eq(mp_pyro_fit(junk, sizeof junk, 0, 0, NULL, &parts, err, sizeof err),
                 MP_PYRO_E_INVALID_ARGUMENT);
    cr_expect(strstr(err, "not a pprof"), "%s", err);
    tp_heap_values v;
    fixed_values(0, &v);
    size_t len;
    uint8_t *in = tp_build_heap(&v, 1700000000000000000, 10000000000, true, &len);
    cr_expect_eq(mp_pyro_fit(in, len, 0, 64, NULL, &parts, err, sizeof err),
                 MP_PYRO_E_INVALID_ARGUMENT);
    cr_expect(strstr(err, "one stack"), "%s", err);
    cr_expect_eq(mp_pyro_fit(in, len, 1, 0, NULL, &parts, err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(parts.n, 2, "one sample per part");
    mp_pyro_parts_free(&parts);
    free(in);
}

/* mimprof's in-use samples come per (stack, age bucket) with a numeric
 * `age` label: uploaded, they are one sample per stack, no label, the
 * values summed (fit.h). */
Test(fit, age_label_removed_and_buckets_merged)
{
    char *strings[] = {"", "inuse_space", "bytes", "age", "seconds", "f"};
    Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *vtp = &vt;
    vt.type = 1, vt.unit = 2;
    Perftools__Profiles__Function fn = PERFTOOLS__PROFILES__FUNCTION__INIT, *fnp = &fn;
    fn.id = 1, fn.name = 5;
    Perftools__Profiles__Line ln = PERFTOOLS__PROFILES__LINE__INIT, *lnp = &ln;
    ln.function_id = 1;
    Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT, *locp = &loc;
    loc.id = 1, loc.n_line = 1, loc.line = &lnp;
    Perftools__Profiles__Label lab[3], *labp[3];
    Perftools__Profiles__Sample smp[3], *smpp[3];
    uint64_t locid = 1;
    int64_t vals[3] = {100, 200, 400}, ages[3] = {0, 600, 600};
    for (int i = 0; i < 3; i++) {
        perftools__profiles__label__init(&lab[i]);
        lab[i].key = 3, lab[i].num = ages[i], lab[i].num_unit = 4;
        labp[i] = &lab[i];
        perftools__profiles__sample__init(&smp[i]);
        smp[i].n_location_id = 1, smp[i].location_id = &locid;
        smp[i].n_value = 1, smp[i].value = &vals[i];
        smp[i].n_label = 1, smp[i].label = &labp[i];
        smpp[i] = &smp[i];
    }
    Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
    prof.n_sample_type = 1, prof.sample_type = &vtp;
    prof.n_sample = 3, prof.sample = smpp;
    prof.n_location = 1, prof.location = &locp;
    prof.n_function = 1, prof.function = &fnp;
    prof.n_string_table = 6, prof.string_table = strings;
    size_t len = perftools__profiles__profile__get_packed_size(&prof);
    uint8_t *in = malloc(len);
    perftools__profiles__profile__pack(&prof, in);
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(in, len, 16000, 4 << 20, NULL, &parts, err, sizeof err), MP_PYRO_OK,
                 "%s", err);
    cr_assert_eq(parts.n, 1);
    Perftools__Profiles__Profile *got =
        perftools__profiles__profile__unpack(NULL, parts.v[0].len, parts.v[0].pprof);
    cr_assert_not_null(got);
    cr_expect_eq(got->n_sample, 1, "three age buckets of one stack: one sample");
    cr_expect_eq(got->sample[0]->n_label, 0, "no age label goes up");
    cr_expect_eq(got->sample[0]->value[0], 700);
    perftools__profiles__profile__free_unpacked(got, NULL);
    mp_pyro_parts_free(&parts);
    free(in);
}
