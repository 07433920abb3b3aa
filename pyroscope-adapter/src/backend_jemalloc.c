/* SPDX-License-Identifier: MIT */
/* jemalloc's own heap profiler as a backend (the role jemalloc_pprof plays
 * for Rust): for programs already running jemalloc with prof:true. Each
 * report dumps the heap with mallctl("prof.dump") into a private
 * temporary file, parses the heap_v2 text, unbiases once and builds pprof
 * inuse_objects/inuse_space with the profiling library's foreign-stack
 * builder (jeprof_pprof.h): the mimprof backend's mappings, symbols and
 * names, one symbol cache kept across reports.
 *
 * jemalloc is found at run time (mallctl by dlsym, or given by the
 * caller): linking libjemalloc here would replace the malloc of every
 * program that links this library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_internal.h"

#ifdef MP_PYRO_NO_JEMALLOC_BACKEND

void mp_pyro_jemalloc_options_init(mp_pyro_jemalloc_options *opt)
{
    if (opt) {
        memset(opt, 0, sizeof *opt);
        opt->symbolize = true;
    }
}

mp_pyro_status mp_pyro_backend_jemalloc_new(const mp_pyro_jemalloc_options *opt,
                                            mp_pyro_backend **out)
{
    (void)opt;
    if (out)
        *out = NULL;
    return MP_PYRO_E_UNSUPPORTED;
}

#else

#include "jeprof_pprof.h"

typedef struct je_state {
    mp_pyro_backend *self;
    mp_pyro_mallctl_fn mallctl;
    bool mallctl_given;
    char *tmp_dir;
    bool symbolize;
    mp_prof_symbolizer *syms; /* this process's objects and symbols, across reports */
    char version[64];
    char comment[160];
} je_state;

void mp_pyro_jemalloc_options_init(mp_pyro_jemalloc_options *opt)
{
    if (!opt)
        return;
    memset(opt, 0, sizeof *opt);
    opt->symbolize = true;
}

static const char *je_name(void *st)
{
    (void)st;
    return "jemalloc";
}

static mp_pyro_status je_start(void *st)
{
    je_state *j = st;
    if (!j->mallctl_given) {
        union {
            void *p;
            mp_pyro_mallctl_fn f;
        } u = {.p = dlsym(RTLD_DEFAULT, "mallctl")};
        j->mallctl = u.f;
    }
    if (!j->mallctl)
        return mp_pyro_backend_fail(j->self, MP_PYRO_E_UNSUPPORTED,
                                    "jemalloc's mallctl is not in this process (link or preload "
                                    "jemalloc, or pass its mallctl in the options)");
    bool prof = false;
    size_t sz = sizeof prof;
    int rc = j->mallctl("opt.prof", &prof, &sz, NULL, 0);
    if (rc != 0)
        return mp_pyro_backend_fail(j->self, MP_PYRO_E_UNSUPPORTED,
                                    "jemalloc has no heap profiler (built without --enable-prof): "
                                    "opt.prof: %s",
                                    strerror(rc));
    if (!prof)
        return mp_pyro_backend_fail(j->self, MP_PYRO_E_UNSUPPORTED,
                                    "jemalloc runs without profiling: start the program with "
                                    "MALLOC_CONF=prof:true");
    const char *v = NULL;
    sz = sizeof v;
    if (j->mallctl("version", (void *)&v, &sz, NULL, 0) == 0 && v)
        mp_pyro_fmt(j->version, sizeof j->version, "%s", v);
    mp_pyro_fmt(j->comment, sizeof j->comment,
                "jemalloc %s prof.dump (heap_v2), unbiased once with jeprof's rule", j->version);
    return MP_PYRO_OK;
}

static mp_pyro_status je_dump(je_state *j, char **text, size_t *len)
{
    const char *dir = j->tmp_dir ? j->tmp_dir : getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    char *path = NULL;
    if (asprintf(&path, "%s/mimprof-jeprof-XXXXXX", dir) < 0)
        return MP_PYRO_E_NOMEM;
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        mp_pyro_status s = mp_pyro_backend_fail(j->self, MP_PYRO_E_IO, "temporary file in %s: %s",
                                                dir, strerror(errno));
        free(path);
        return s;
    }
    close(fd);
    const char *fname = path;
    int rc = j->mallctl("prof.dump", NULL, NULL, (void *)&fname, sizeof fname);
    mp_pyro_status s = MP_PYRO_OK;
    uint8_t *data;
    if (rc != 0)
        s = mp_pyro_backend_fail(j->self, MP_PYRO_E_BACKEND, "mallctl(\"prof.dump\"): %s",
                                 strerror(rc));
    else if (mp_pyro_read_file(path, &data, len) != 0)
        s = mp_pyro_backend_fail(j->self, MP_PYRO_E_IO, "reading the heap dump %s: %s", path,
                                 strerror(errno));
    else
        *text = (char *)data;
    unlink(path);
    free(path);
    return s;
}

/* An address of jemalloc's code (its frames lead every backtrace). */
static uintptr_t jemalloc_code(const je_state *j)
{
    union {
        mp_pyro_mallctl_fn f;
        void *p;
    } u = {.f = j->mallctl};
    return (uintptr_t)u.p;
}

static mp_pyro_status je_report(void *st, const mp_pyro_window *w, mp_pyro_profile *out)
{
    je_state *j = st;
    char *text = NULL;
    size_t len = 0;
    mp_pyro_status s = je_dump(j, &text, &len);
    if (s != MP_PYRO_OK)
        return s;
    mp_prof_status ps = j->syms ? MP_PROF_OK : mp_prof_symbolizer_new(&j->syms);
    if (ps != MP_PROF_OK) {
        free(text);
        return mp_pyro_backend_prof_fail(j->self, ps, "mp_prof_symbolizer_new");
    }
    mp_jeprof_pprof_options o = {
        .allocator_code = jemalloc_code(j),
        .symbolize = j->symbolize ? MP_PROF_SYMBOLIZE_FUNCTIONS : MP_PROF_SYMBOLIZE_NONE,
        .time_nanos = w->from_nanos,
        .duration_nanos = w->until_nanos - w->from_nanos,
        .comment = j->comment,
    };
    char err[200] = "";
    ps = mp_jeprof_pprof_text(text, len, j->syms, &o, &out->pprof, &out->len, err, sizeof err);
    free(text);
    if (ps == MP_PROF_E_INVALID_CONFIG && err[0])
        return mp_pyro_backend_fail(j->self, MP_PYRO_E_BACKEND, "%s", err);
    out->flags = MP_PYRO_PROFILE_LIVE;
    return mp_pyro_backend_prof_fail(j->self, ps, "building the profile");
}

static void je_release(void *st, mp_pyro_profile *p)
{
    (void)st;
    mp_prof_buffer_free(p->pprof);
    p->pprof = NULL;
    p->len = 0;
}

static mp_pyro_status je_stop(void *st)
{
    (void)st;
    return MP_PYRO_OK;
}

static void je_destroy(void *st)
{
    je_state *j = st;
    mp_prof_symbolizer_free(j->syms);
    free(j->tmp_dir);
    free(j);
}

static const mp_pyro_backend_ops je_ops = {
    .name = je_name,
    .start = je_start,
    .report = je_report,
    .release = je_release,
    .stop = je_stop,
    .destroy = je_destroy,
};

mp_pyro_status mp_pyro_backend_jemalloc_new(const mp_pyro_jemalloc_options *opt,
                                            mp_pyro_backend **out)
{
    if (!out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_jemalloc_options def;
    mp_pyro_jemalloc_options_init(&def);
    if (!opt)
        opt = &def;
    je_state *j = calloc(1, sizeof *j);
    if (!j)
        return MP_PYRO_E_NOMEM;
    j->mallctl = opt->mallctl;
    j->mallctl_given = opt->mallctl != NULL;
    j->symbolize = opt->symbolize;
    if (opt->tmp_dir && !(j->tmp_dir = strdup(opt->tmp_dir))) {
        free(j);
        return MP_PYRO_E_NOMEM;
    }
    mp_pyro_status s = mp_pyro_backend_new(&je_ops, j, out);
    if (s != MP_PYRO_OK) {
        je_destroy(j);
        return s;
    }
    j->self = *out;
    return MP_PYRO_OK;
}

#endif /* MP_PYRO_NO_JEMALLOC_BACKEND */
