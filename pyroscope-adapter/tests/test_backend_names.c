/* SPDX-License-Identifier: MIT */
/* The jemalloc backend and the mimprof backend name the frames of the same
 * C++ program alike (Function.name demangled and qualified, system_name
 * the linkage name): one stack of cxx_shop.cpp is profiled by the mimprof
 * backend (a sampling allocator over mimalloc, every allocation sampled)
 * and, captured with backtrace(), turned into pprof as the jemalloc
 * backend turns a heap_v2 dump (mp_jeprof_pprof over this process). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

#include "backend_internal.h"
#include "jeprof_pprof.h"
#include "profile.pb-c.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tna, mp_sys_mimalloc);

void *pyro_names_alloc(size_t size);
void pyro_names_run(void);

#define MAXF 64
static void *stack[MAXF];
static int depth;

__attribute__((noinline, visibility("default"))) void *pyro_names_alloc(size_t size)
{
    if (depth == 0)
        depth = backtrace(stack, MAXF);
    return tna_alloc(size, 16);
}

#define PUT "shop::Cache<shop::Item>::put"

typedef struct named {
    char *sys, *name;
} named;

/* The (system_name, name) pairs of a profile's functions. */
static size_t functions(const uint8_t *pb, size_t len, named *out, size_t cap)
{
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, pb);
    cr_assert(p != NULL, "the profile decodes");
    size_t n = 0;
    for (size_t i = 0; i < p->n_function && n < cap; i++) {
        const Perftools__Profiles__Function *f = p->function[i];
        cr_assert(f->name >= 0 && (size_t)f->name < p->n_string_table);
        cr_assert(f->system_name >= 0 && (size_t)f->system_name < p->n_string_table);
        out[n].sys = strdup(p->string_table[f->system_name]);
        out[n].name = strdup(p->string_table[f->name]);
        n++;
    }
    perftools__profiles__profile__free_unpacked(p, NULL);
    return n;
}

static const named *by_sys(const named *v, size_t n, const char *sys)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].sys, sys) == 0)
            return &v[i];
    return NULL;
}

static const named *by_name_prefix(const named *v, size_t n, const char *prefix)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(v[i].name, prefix, strlen(prefix)) == 0)
            return &v[i];
    return NULL;
}

Test(backend_names, jemalloc_and_mimprof_agree, .timeout = 120)
{
    tna_dealloc(tna_alloc(16, 8), 16, 8); /* the sampling allocator is observed */
    mp_prof_config pc;
    mp_prof_config_init(&pc);
    pc.sample_interval_bytes = 1; /* every allocation */
    pc.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    mp_profiler *prof;
    cr_assert_eq(mp_profiler_start(&pc, &prof), MP_PROF_OK);
    pyro_names_run();
    cr_assert_gt(depth, 2, "backtrace() captured the stack");

    /* The mimprof backend's report. */
    mp_pyro_backend *mb;
    cr_assert_eq(mp_pyro_backend_mimprof_attach(prof, &mb), MP_PYRO_OK);
    mp_pyro_window w = {.from_nanos = 1000, .until_nanos = 2000};
    mp_pyro_profile mprof = {0};
    cr_assert_eq(mb->ops->report(mb->state, &w, &mprof), MP_PYRO_OK, "%s",
                 mp_pyro_backend_error(mb));
    static named m[4096], j[4096];
    size_t nm = functions(mprof.pprof, mprof.len, m, 4096);
    mb->ops->release(mb->state, &mprof);
    mp_pyro_backend_free(mb);

    /* The same stack as the jemalloc backend encodes a heap_v2 dump. */
    char text[4096];
    int at = snprintf(text, sizeof text, "heap_v2/4096\n  t*: 1: 64 [0: 0]\n@");
    for (int i = 0; i < depth; i++)
        at += snprintf(text + at, sizeof text - (size_t)at, " %p", stack[i]);
    snprintf(text + at, sizeof text - (size_t)at, "\n  t*: 1: 64 [0: 0]\n");
    mp_prof_symbolizer *s;
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    mp_jeprof_pprof_options o = {.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS};
    uint8_t *jb;
    size_t jlen;
    char err[200];
    cr_assert_eq(mp_jeprof_pprof_text(text, strlen(text), s, &o, &jb, &jlen, err, sizeof err),
                 MP_PROF_OK, "%s", err);
    size_t nj = functions(jb, jlen, j, 4096);
    mp_prof_buffer_free(jb);
    mp_prof_symbolizer_free(s);
    cr_expect_eq(mp_profiler_stop(prof), MP_PROF_OK);
    mp_profiler_free(prof);

    /* The C++ frame is named, demangled and qualified, by both... */
    const named *mput = by_name_prefix(m, nm, PUT), *jput = by_name_prefix(j, nj, PUT);
    cr_assert(mput != NULL, "the mimprof backend names " PUT);
    cr_assert(jput != NULL, "the jemalloc backend names " PUT);
    cr_expect_str_eq(mput->sys, jput->sys, "one linkage name");
    cr_expect(strncmp(jput->sys, "_ZN4shop5Cache", 14) == 0, "system_name %s", jput->sys);
    /* ...and every function both profiles hold has one name in both. */
    size_t common = 0;
    for (size_t i = 0; i < nj; i++) {
        const named *x = by_sys(m, nm, j[i].sys);
        if (x == NULL)
            continue;
        common++;
        cr_expect_str_eq(x->name, j[i].name, "%s", j[i].sys);
    }
    cr_expect_geq(common, 3, "put, pyro_names_run and their callers are in both");
    const named *run = by_sys(j, nj, "pyro_names_run");
    cr_expect(run != NULL && strcmp(run->name, "pyro_names_run") == 0, "a C name is untouched");
    for (size_t i = 0; i < nm; i++) {
        free(m[i].sys);
        free(m[i].name);
    }
    for (size_t i = 0; i < nj; i++) {
        free(j[i].sys);
        free(j[i].name);
    }
}
