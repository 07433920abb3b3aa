/* SPDX-License-Identifier: MIT */
/* The jemalloc backend on a real jemalloc (5.3) heap profiler, run with
 * MALLOC_CONF=prof:true,lg_prof_sample:12 (set by meson). A known
 * population is allocated with mallocx() (jemalloc's own API, so that it
 * reaches jemalloc also under AddressSanitizer, which takes malloc) and
 * must come back unbiased within the sampling error. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_internal.h"
#include "harness.h"
#include "jeprof_parse.h"

#define SMALL_N    40000
#define SMALL_SIZE 256
#define BIG_N      200
#define BIG_SIZE   65536

static void *small_blocks[SMALL_N];
static void *big_blocks[BIG_N];

__attribute__((noinline, visibility("default"))) void pyro_test_alloc_small(void)
{
    for (int i = 0; i < SMALL_N; i++)
        small_blocks[i] = mallocx(SMALL_SIZE, 0);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, visibility("default"))) void pyro_test_alloc_big(void)
{
    for (int i = 0; i < BIG_N; i++)
        big_blocks[i] = mallocx(BIG_SIZE, 0);
    __asm__ volatile("" ::: "memory");
}

static void free_all(void)
{
    for (int i = 0; i < SMALL_N; i++)
        dallocx(small_blocks[i], 0);
    for (int i = 0; i < BIG_N; i++)
        dallocx(big_blocks[i], 0);
}

static bool prof_on(void)
{
    bool on = false;
    size_t sz = sizeof on;
    return mallctl("opt.prof", &on, &sz, NULL, 0) == 0 && on;
}

/* Starts (optionally) and reports through the backend's vtable, as the
 * agent's reporter does. */
static mp_pyro_status backend_report(mp_pyro_backend *b, const mp_pyro_window *w,
                                     mp_pyro_profile *out, bool start)
{
    if (start) {
        mp_pyro_status s = b->ops->start(b->state);
        if (s != MP_PYRO_OK)
            return s;
    }
    return b->ops->report(b->state, w, out);
}

Test(jemalloc, known_population_unbiased, .timeout = 60)
{
    if (!prof_on())
        cr_skip_test("jemalloc profiling is off (MALLOC_CONF=prof:true not in effect)");
    mp_pyro_jemalloc_options o;
    mp_pyro_jemalloc_options_init(&o);
    o.mallctl = mallctl;
    mp_pyro_backend *b;
    cr_assert_eq(mp_pyro_backend_jemalloc_new(&o, &b), MP_PYRO_OK);
    pyro_test_alloc_small();
    pyro_test_alloc_big();

    /* The raw dump: jemalloc 5.3 does NOT write unbiased values; it writes
     * values chosen so that jeprof's rule recovers its internal estimate.
     * So the raw count of the 256-byte population is about N*p, far below N. */
    char path[] = "/tmp/mimprof-jeprof-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    const char *fname = path;
    cr_assert_eq(mallctl("prof.dump", NULL, NULL, (void *)&fname, sizeof fname), 0);
    FILE *f = fopen(path, "r");
    tbuf text = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        tbuf_put(&text, chunk, n);
    fclose(f);
    unlink(path);
    mp_jeprof_dump d;
    char err[200];
    cr_assert_eq(mp_jeprof_parse((char *)text.p, text.len, &d, err, sizeof err), 0, "%s", err);
    cr_expect_eq(d.period, 4096);
    uint64_t raw_small = 0;
    for (size_t i = 0; i < d.nstacks; i++)
        if (d.stacks[i].objs && d.stacks[i].bytes / d.stacks[i].objs < 300 &&
            d.stacks[i].bytes / d.stacks[i].objs > 200)
            raw_small += d.stacks[i].objs;
    double p = 1 - exp(-(double)SMALL_SIZE / 4096.0);
    cr_expect_lt(raw_small, SMALL_N / 4,
                 "raw dump counts are sampled counts (~N*p = %.0f), got %llu", SMALL_N * p,
                 (unsigned long long)raw_small);
    mp_jeprof_dump_free(&d);
    tbuf_free(&text);

    /* Through the backend: unbiased once. */
    mp_pyro_window w = {1000, 2000};
    mp_pyro_profile prof = {0};
    mp_pyro_status st = backend_report(b, &w, &prof, true);
    cr_assert_eq(st, MP_PYRO_OK, "%s", mp_pyro_backend_error(b));
    tp_profile pp;
    cr_assert(tp_decode(prof.pprof, prof.len, &pp));
    int objs = tp_type_index(&pp, "inuse_objects"), space = tp_type_index(&pp, "inuse_space");
    cr_assert(objs >= 0 && space >= 0);
    cr_expect_eq(pp.period, 4096);
    cr_expect_eq(pp.time_nanos, 1000);
    cr_expect_eq(pp.duration_nanos, 1000);
    int64_t so = tp_total_func(&pp, objs, "pyro_test_alloc_small");
    int64_t sb = tp_total_func(&pp, space, "pyro_test_alloc_small");
    int64_t bo = tp_total_func(&pp, objs, "pyro_test_alloc_big");
    int64_t bb = tp_total_func(&pp, space, "pyro_test_alloc_big");
    /* ~2,500 samples: 5 sigma is ~10%; jemalloc's count is a fixed point
     * with 1/8 resolution per sample (up to -1.5% at this size). */
    cr_expect(fabs((double)so / SMALL_N - 1) < 0.10, "small objects %lld, allocated %d",
              (long long)so, SMALL_N);
    cr_expect(fabs((double)sb / (SMALL_N * SMALL_SIZE) - 1) < 0.10, "small bytes %lld",
              (long long)sb);
    cr_expect(fabs((double)bo / BIG_N - 1) < 0.03, "big objects %lld, allocated %d", (long long)bo,
              BIG_N);
    cr_expect(fabs((double)bb / ((double)BIG_N * BIG_SIZE) - 1) < 0.03, "big bytes %lld",
              (long long)bb);
    /* applying the rule twice would overshoot the small population ~16x */
    double o2, b2;
    mp_jeprof_unbias((uint64_t)so, (uint64_t)sb, 4096, &o2, &b2);
    cr_expect_gt(o2, 5.0 * SMALL_N);
    /* leaf frames are the allocating functions, not jemalloc's internals */
    size_t leaf_ok = 0;
    for (size_t i = 0; i < pp.nsamples; i++) {
        const char *leaf = tp_leaf(&pp, i);
        if (!strcmp(leaf, "pyro_test_alloc_small") || !strcmp(leaf, "pyro_test_alloc_big"))
            leaf_ok++;
        cr_expect(strncmp(leaf, "je_", 3) != 0 && strcmp(leaf, "mallocx") != 0, "leaf %s", leaf);
    }
    cr_expect_geq(leaf_ok, 2);
    /* mappings from dl_iterate_phdr, with build-ids */
    cr_expect_gt(pp.nmappings, 1);
    bool has_build_id = false;
    for (size_t i = 0; i < pp.nmappings; i++)
        has_build_id = has_build_id || tp_str(&pp, pp.mappings[i].build_id)[0];
    cr_expect(has_build_id);
    tp_free(&pp);
    b->ops->release(b->state, &prof);
    mp_pyro_backend_free(b);
    free_all();
}

static int fake_mallctl_off(const char *name, void *oldp, size_t *oldlenp, void *newp,
                            size_t newlen)
{
    (void)newp;
    (void)newlen;
    if (strcmp(name, "opt.prof") == 0) {
        *(bool *)oldp = false;
        *oldlenp = sizeof(bool);
        return 0;
    }
    return ENOENT;
}

static int fake_mallctl_noprof(const char *name, void *oldp, size_t *oldlenp, void *newp,
                               size_t newlen)
{
    (void)name;
    (void)oldp;
    (void)oldlenp;
    (void)newp;
    (void)newlen;
    return ENOENT;
}

Test(jemalloc, clear_errors_without_profiling)
{
    mp_pyro_jemalloc_options o;
    mp_pyro_jemalloc_options_init(&o);
    o.mallctl = fake_mallctl_off;
    mp_pyro_backend *b;
    cr_assert_eq(mp_pyro_backend_jemalloc_new(&o, &b), MP_PYRO_OK);
    mp_pyro_window w = {0, 1};
    mp_pyro_profile p = {0};
    cr_expect_eq(backend_report(b, &w, &p, true), MP_PYRO_E_UNSUPPORTED);
    cr_expect(strstr(mp_pyro_backend_error(b), "MALLOC_CONF=prof:true"), "%s",
              mp_pyro_backend_error(b));
    mp_pyro_backend_free(b);
    o.mallctl = fake_mallctl_noprof;
    cr_assert_eq(mp_pyro_backend_jemalloc_new(&o, &b), MP_PYRO_OK);
    cr_expect_eq(backend_report(b, &w, &p, true), MP_PYRO_E_UNSUPPORTED);
    cr_expect(strstr(mp_pyro_backend_error(b), "enable-prof"), "%s", mp_pyro_backend_error(b));
    mp_pyro_backend_free(b);
}
