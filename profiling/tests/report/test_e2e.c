/* SPDX-License-Identifier: MIT */
/* End to end: allocations through a sampling allocator instantiated over
 * mimalloc, a Profiler session, mp_profiler_report(), and the report
 * side's mappings, symbols, frame filtering and truncation marker, checked
 * by decoding and by `go tool pprof`. The allocation sites are compiled
 * -O2 -g (e2e_sites.c), one of them inlined, one in a dlopen'd library. */
#include <criterion/criterion.h>
#include <dlfcn.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>

#include "e2e_sites.h"
#include "util.h"

/* Instantiated in its own translation unit (e2e_alloc.c), the documented
 * external form: its functions stay in the hook section, not inlined here. */
MP_PROF_SAMPLING_ALLOCATOR_DECLARE(e2ealloc);

static void *e2e_alloc(size_t n) { return e2ealloc_alloc(n, 16); }

static void e2e_free(void *p) { e2ealloc_dealloc(p, 0, 16); }

/* Called back from the dlopen'd library: allocates there. */
static void *dl_block;
static void dl_cb(int line)
{
    (void)line;
    dl_block = e2ealloc_alloc(4096, 16);
    __asm__ volatile("" ::: "memory");
}

static mp_profiler *start(unsigned depth)
{
    /* The allocator must have been observed once. */
    e2e_free(e2e_alloc(64));
    mp_prof_config cfg;
    mp_prof_config_init(&cfg);
    cfg.sample_interval_bytes = 1; /* every allocation of >= 64 B is sampled (p > 1 - e^-64) */
    cfg.max_stack_depth = depth;
    cfg.seed = 42;
#if MP_HAVE_LIBDW
    cfg.symbolize = MP_PROF_SYMBOLIZE_LINES;
#else
    cfg.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS; /* LINES is MP_PROF_E_UNSUPPORTED */
#endif
    mp_profiler *p = NULL;
    cr_assert_eq(mp_profiler_start(&cfg, &p), MP_PROF_OK);
    return p;
}

/* Names of every frame (all lines of all locations) of `p`. */
static bool has_function(const ut_prof *p, const char *name)
{
    for (size_t i = 0; i < p->n_location; i++)
        for (size_t k = 0; k < p->location[i]->n_line; k++)
            if (strcmp(ut_line_fn(p, p->location[i], k), name) == 0)
                return true;
    return false;
}

static bool any_function_contains(const ut_prof *p, const char *part)
{
    for (size_t i = 0; i < p->n_location; i++)
        for (size_t k = 0; k < p->location[i]->n_line; k++)
            if (strstr(ut_line_fn(p, p->location[i], k), part) != NULL)
                return true;
    return false;
}

/* The leaf function of the sample whose leaf is `name` exists. */
static bool leaf_is(const ut_prof *p, const char *name)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        if (p->sample[i]->n_location_id == 0)
            continue;
        const Perftools__Profiles__Location *l = ut_loc(p, p->sample[i]->location_id[0]);
        if (l && l->n_line && strcmp(ut_line_fn(p, l, 0), name) == 0)
            return true;
    }
    return false;
}

Test(report_e2e, named_sites_lines_inlined_dlopen_and_no_hook_frames, .timeout = 240)
{
    void *h = dlopen(DLSITE_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    void (*site)(void (*)(int)) = (void (*)(void (*)(int)))(uintptr_t)dlsym(h, "report_dl_site");
    mp_profiler *prof = start(64);

    e2e_sites_set_allocator(e2ealloc_alloc);
    void *a = e2e_site_alpha(1024);
    void *g = e2e_outer_gamma(2048);
    void *k = mp_prof_hook_sample_app(512); /* an application function named like the profiler's */
    site(dl_cb);
    uint8_t *inner = NULL;
    size_t inner_len = 0;
    void *r = e2e_calls_report(prof, 256, &inner, &inner_len);

    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(mp_profiler_report(prof, &buf, &len), MP_PROF_OK);
    ut_prof *p = ut_decode(buf, len);
    cr_assert_not_null(p);

    /* The sites, as leaves: the hook frames were cut by address. */
    cr_assert(leaf_is(p, "e2e_site_alpha"));
    cr_assert(leaf_is(p, "e2e_inlined_beta"), "the inlined function is the leaf frame");
    cr_assert(has_function(p, "e2e_outer_gamma"), "and its caller is a frame of the same location");
    cr_assert(leaf_is(p, "mp_prof_hook_sample_app"), "kept although named like the profiler");
    cr_assert(leaf_is(p, "e2e_calls_report"), "a function that calls mp_profiler_report is kept");
    cr_assert(has_function(p, "dl_cb"));
    cr_assert(has_function(p, "report_dl_site"), "the dlopen'd library's function");
    /* Never the profiler's own frames. */
    cr_assert_not(any_function_contains(p, "e2ealloc_"), "no sampling-allocator frame");
    cr_assert_not(has_function(p, "mp_prof_hook_sample"), "no hook frame");
    cr_assert_not(any_function_contains(p, "unw_"), "no unwinder frame");
    /* file:line of a site. */
    bool alpha_line = false;
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (l->n_line && strcmp(ut_line_fn(p, l, 0), "e2e_site_alpha") == 0) {
            alpha_line = l->line[0]->line == e2e_alpha_line &&
                         strstr(ut_line_file(p, l, 0), "e2e_sites.c") != NULL;
            /* The address lies in its mapping. */
            const Perftools__Profiles__Mapping *m = ut_map(p, l->mapping_id);
            cr_assert_not_null(m);
            cr_assert(l->address >= m->memory_start && l->address < m->memory_limit);
            cr_assert(m->has_functions);
        }
    }
    cr_assert(alpha_line, "e2e_site_alpha at e2e_sites.c:%d", e2e_alpha_line);

    mp_prof_stats st;
    mp_prof_diagnostics(&st);
    /* Criterion's and libc's internal frames have no names here: the
     * encoder's count and the classifier on the bytes agree. */
    mp_prof_symbol_quality q;
    cr_assert_eq(mp_prof_classify_symbols(buf, len, &q), MP_PROF_OK);
    cr_assert_eq(st.last_symbol_quality, (int)q);
    cr_assert_geq(q, MP_PROF_QUALITY_PARTIAL);
    cr_assert_gt(st.symbol_bytes, 0);

    /* go tool pprof shows them too (live values: the interval samples
     * went to the report made inside e2e_calls_report). */
    char *dir = ut_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/e2e.pb", dir);
    cr_assert(ut_write(path, buf, len));
    char *env = ut_go_env(dir);
    int rc;
    char *top = ut_run(
        &rc, "env %s '%s' tool pprof -symbolize=none -sample_index=inuse_space -top '%s' 2>&1", env,
        GO, path);
    cr_assert_eq(rc, 0, "%s", top);
    cr_assert_not_null(strstr(top, "e2e_site_alpha"), "%s", top);
    cr_assert_not_null(strstr(top, "e2e_inlined_beta"), "%s", top);
    cr_assert_not_null(strstr(top, "mp_prof_hook_sample_app"), "%s", top);
    free(top);
    free(env);
    free(ut_run(&rc, "rm -rf '%s'", dir));
    free(dir);

    ut_free(p);
    mp_prof_buffer_free(buf);
    mp_prof_buffer_free(inner);
    e2e_free(a);
    e2e_free(g);
    e2e_free(k);
    e2e_free(r);
    e2e_free(dl_block);
    mp_profiler_free(prof);
    dlclose(h);
}

Test(report_e2e, deep_recursion_truncated_and_marked, .timeout = 120)
{
    mp_profiler *prof = start(16);
    e2e_sites_set_allocator(e2ealloc_alloc);
    void *deep = e2e_recurse(100, 1024);
    void *shallow = e2e_site_alpha(1024);
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(mp_profiler_report(prof, &buf, &len), MP_PROF_OK);
    ut_prof *p = ut_decode(buf, len);
    cr_assert_not_null(p);
    bool marked = false, unmarked_shallow = false;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_location_id == 0)
            continue;
        const Perftools__Profiles__Location *leaf = ut_loc(p, s->location_id[0]);
        const Perftools__Profiles__Location *root = ut_loc(p, s->location_id[s->n_location_id - 1]);
        bool is_marker = strcmp(ut_line_fn(p, root, 0), "[truncated]") == 0;
        if (strcmp(ut_line_fn(p, leaf, 0), "e2e_recurse") == 0 && is_marker) {
            marked = true;
            cr_assert_eq(s->n_location_id, 17, "16 frames kept + the marker");
        }
        if (strcmp(ut_line_fn(p, leaf, 0), "e2e_site_alpha") == 0 && !is_marker)
            unmarked_shallow = true;
    }
    cr_assert(marked, "the deep stack is cut at max_stack_depth and marked");
    cr_assert(unmarked_shallow, "a short stack is not marked");
    ut_free(p);
    mp_prof_buffer_free(buf);
    e2e_free(deep);
    e2e_free(shallow);
    mp_profiler_free(prof);
}
