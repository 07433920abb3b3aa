/* SPDX-License-Identifier: MIT */
/* Allocator-to-pprof reconstruction: a known population is allocated
 * through the sampling allocator from distinct call sites, part of it kept
 * live; the decoded report must give each site's allocation and in-use
 * counts back within the estimator's own variance. Sites are identified
 * from the report's frame addresses with dladdr(), independently of the
 * profiler's symbolization; profiler frames must never be the leaf. */
#include "helpers.h"

#include <dlfcn.h>

#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

void *rc_site_small(void);
void *rc_site_medium(void);
void *rc_site_large(void);
void *rc_site_zeroed(void);

__attribute__((noinline)) void *rc_site_small(void)
{
    void *p = tmi_alloc(100, 8);
    TEST_NO_TAIL(p);
    return p;
}
__attribute__((noinline)) void *rc_site_medium(void)
{
    void *p = tmi_alloc(4000, 16);
    TEST_NO_TAIL(p);
    return p;
}
__attribute__((noinline)) void *rc_site_large(void)
{
    void *p = tmi_alloc(100000, 64);
    TEST_NO_TAIL(p);
    return p;
}
__attribute__((noinline)) void *rc_site_zeroed(void)
{
    void *p = tmi_alloc_zeroed(700, 8);
    TEST_NO_TAIL(p);
    return p;
}

struct site {
    const char *name;
    size_t size;
    double n;    /* allocations */
    double live; /* kept live at the report */
    double got_alloc, got_alloc_bytes, got_inuse, got_inuse_bytes;
};

Test(reconstruct, known_population_per_site, .timeout = 120)
{
    const double R = 4096;
    const double scale = TEST_SANITIZED ? 0.25 : 1.0;
    struct site sites[] = {
        {"rc_site_small", 100, 100000 * scale, 0, 0, 0, 0, 0},
        {"rc_site_medium", 4000, 20000 * scale, 5000 * scale, 0, 0, 0, 0},
        {"rc_site_large", 100000, 300, 300, 0, 0, 0, 0},
        {"rc_site_zeroed", 700, 30000 * scale, 10000 * scale, 0, 0, 0, 0},
    };
    void *(*fns[])(void) = {rc_site_small, rc_site_medium, rc_site_large, rc_site_zeroed};
    const size_t nsites = sizeof sites / sizeof *sites;

    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config((size_t)R, 2024);
    mp_profiler *p = test_start(&c);
    void **kept[4];
    for (size_t k = 0; k < nsites; k++) {
        kept[k] = malloc(sizeof(void *) * (size_t)sites[k].live + 1);
        size_t live = 0;
        for (size_t i = 0; i < (size_t)sites[k].n; i++) {
            void *b = fns[k]();
            cr_assert_not_null(b);
            if (i < (size_t)sites[k].live)
                kept[k][live++] = b;
            else
                tmi_dealloc(b, i % 2 ? sites[k].size : 0, 8);
        }
    }
    tp_profile prof;
    test_report(p, &prof);
    int ao = tp_type_index(&prof, "alloc_objects"), as = tp_type_index(&prof, "alloc_space");
    int io = tp_type_index(&prof, "inuse_objects"), is = tp_type_index(&prof, "inuse_space");
    const char *self = NULL;
    for (size_t i = 0; i < prof.nsamples; i++) {
        const tp_sample *s = &prof.samples[i];
        Dl_info info;
        uint64_t leaf = tp_leaf_address(&prof, s);
        cr_assert(dladdr((void *)(uintptr_t)(leaf - 1), &info), "leaf %#llx not in any object",
                  (unsigned long long)leaf);
        if (self == NULL)
            self = info.dli_fname;
        cr_assert_str_eq(info.dli_fname, self, "a leaf frame outside the test program");
        cr_assert_not_null(info.dli_sname, "leaf %#llx has no symbol", (unsigned long long)leaf);
        struct site *st = NULL;
        for (size_t k = 0; k < nsites; k++)
            if (strcmp(info.dli_sname, sites[k].name) == 0)
                st = &sites[k];
        cr_assert_not_null(st, "leaf frame in %s, not an allocation site", info.dli_sname);
        st->got_alloc += (double)s->values[ao];
        st->got_alloc_bytes += (double)s->values[as];
        st->got_inuse += (double)s->values[io];
        st->got_inuse_bytes += (double)s->values[is];
    }
    for (size_t k = 0; k < nsites; k++) {
        struct site *st = &sites[k];
        double pr = test_p((double)st->size, R);
        double tol_a = TEST_SIGMAS * test_sigma_objects(st->n, pr) + 1;
        double tol_l = TEST_SIGMAS * test_sigma_objects(st->live, pr) + 1;
        cr_log_info("%s: alloc %.0f/%.0f, inuse %.0f/%.0f", st->name, st->got_alloc, st->n,
                    st->got_inuse, st->live);
        cr_assert(fabs(st->got_alloc - st->n) <= tol_a,
                  "%s: alloc_objects %.0f, expected %.0f +- %.1f", st->name, st->got_alloc, st->n,
                  tol_a);
        cr_assert(fabs(st->got_alloc_bytes - st->n * (double)st->size) <=
                      tol_a * (double)st->size + 1,
                  "%s: alloc_space %.0f", st->name, st->got_alloc_bytes);
        cr_assert(fabs(st->got_inuse - st->live) <= tol_l,
                  "%s: inuse_objects %.0f, expected %.0f +- %.1f", st->name, st->got_inuse,
                  st->live, tol_l);
        cr_assert(fabs(st->got_inuse_bytes - st->live * (double)st->size) <=
                      tol_l * (double)st->size + 1,
                  "%s: inuse_space %.0f", st->name, st->got_inuse_bytes);
    }
    tp_free(&prof);
    /* free everything: the next report's inuse is empty */
    for (size_t k = 0; k < nsites; k++) {
        for (size_t i = 0; i < (size_t)sites[k].live; i++)
            tmi_dealloc(kept[k][i], sites[k].size, 8);
        free(kept[k]);
    }
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 0);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), 0);
    tp_free(&prof);
    mp_profiler_free(p);
}

#if !defined(TEST_PLATFORM_MAPPINGS) || TEST_PLATFORM_MAPPINGS
/* Mappings: every sample's leaf lies in a mapping of the report, and the
 * first mapping is the main program (the report side's contract, checked
 * here on a real session). */
Test(reconstruct, addresses_fall_in_mappings, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 3);
    mp_profiler *p = test_start(&c);
    void *x = rc_site_medium();
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_gt(prof.nmappings, 0);
    for (size_t i = 0; i < prof.nsamples; i++) {
        for (size_t f = 0; f < prof.samples[i].nlocations; f++) {
            const tp_location *l = tp_location_by_id(&prof, prof.samples[i].location_ids[f]);
            cr_assert_not_null(l);
            int in = 0;
            for (size_t m = 0; m < prof.nmappings; m++)
                in |= l->address >= prof.mappings[m].start && l->address < prof.mappings[m].limit;
            cr_assert(in || l->address == 0, "address %#llx outside every mapping",
                      (unsigned long long)l->address);
        }
    }
    tp_free(&prof);
    tmi_dealloc(x, 4000, 16);
    mp_profiler_free(p);
}
#endif
