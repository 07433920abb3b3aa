/* SPDX-License-Identifier: MIT */
/* The integration recipe of INTEGRATION.md, as the LD_PRELOAD runtime will
 * run it: no link-time dependency on libmimprof-pyroscope; dlopen() it,
 * look the entry points up, start a sink agent from PYROSCOPE_*, submit a
 * report, stop. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "harness.h"

#ifndef PYRO_LIB
#define PYRO_LIB "libmimprof-pyroscope.so.0"
#endif

typedef mp_pyro_status (*start_fn)(mp_pyro_backend *, mp_pyro_agent **);
typedef mp_pyro_status (*submit_fn)(mp_pyro_agent *, const uint8_t *, size_t, int64_t, int64_t);
typedef mp_pyro_status (*stop_fn)(mp_pyro_agent *);
typedef void (*free_fn)(mp_pyro_agent *);
typedef void (*stats_fn)(const mp_pyro_agent *, mp_pyro_stats *);

Test(dlopen, sink_agent_through_dlsym, .timeout = 60)
{
    if (!ts_have_standin())
        cr_skip_test("stand-in not available");
    ts_server s;
    cr_assert(ts_start(&s, NULL));
    void *lib = dlopen(PYRO_LIB, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "%s", dlerror());
    union {
        void *p;
        start_fn f;
    } start = {dlsym(lib, "mp_pyro_agent_start_from_env")};
    union {
        void *p;
        submit_fn f;
    } submit = {dlsym(lib, "mp_pyro_agent_submit")};
    union {
        void *p;
        stop_fn f;
    } stop = {dlsym(lib, "mp_pyro_agent_stop")};
    union {
        void *p;
        free_fn f;
    } release = {dlsym(lib, "mp_pyro_agent_free")};
    union {
        void *p;
        stats_fn f;
    } stats = {dlsym(lib, "mp_pyro_agent_stats")};
    cr_assert(start.p && submit.p && stop.p && release.p && stats.p);
    cr_expect_null(dlsym(lib, "mp_pyro_gzip"), "internal functions are not exported");

    unsetenv("PYROSCOPE_SERVER_ADDRESS");
    mp_pyro_agent *a = NULL;
    cr_expect_eq(start.f(NULL, &a), MP_PYRO_E_NOT_CONFIGURED, "not configured: nothing starts");
    setenv("PYROSCOPE_SERVER_ADDRESS", s.url, 1);
    setenv("PYROSCOPE_APPLICATION_NAME", "dlopened", 1);
    cr_assert_eq(start.f(NULL, &a), MP_PYRO_OK);
    tp_heap_values v;
    fixed_values(0, &v);
    int64_t t = now_ms() * 1000000;
    size_t n;
    uint8_t *p = tp_build_heap(&v, t, 1000000, true, &n);
    cr_expect_eq(submit.f(a, p, n, t, t + 1000000), MP_PYRO_OK);
    free(p);
    cr_expect_eq(stop.f(a), MP_PYRO_OK);
    mp_pyro_stats st;
    stats.f(a, &st);
    cr_expect_eq(st.uploaded, 1);
    release.f(a);
    cr_expect_eq(ts_records(&s, "memory:inuse_space:bytes:space:bytes"), 1);
    dlclose(lib);
    ts_stop(&s);
}
