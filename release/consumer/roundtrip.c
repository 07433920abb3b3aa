/* SPDX-License-Identifier: MIT */
/* Profile round trip of a release's consumer (release.py consumer-test):
 * a sampling allocator instantiated over the provider named by
 * -DROUNDTRIP_PROVIDER (mp_sys_mimalloc or mp_sys_jemalloc), a session,
 * sampled live and freed allocations, one report decoded back. */
#define _GNU_SOURCE
#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>
#include <stdio.h>
#include <string.h>

#ifndef ROUNDTRIP_PROVIDER
#error "compile with -DROUNDTRIP_PROVIDER=<provider prefix>"
#endif

/* One level of indirection, so that ROUNDTRIP_PROVIDER expands first. */
#define INSTANTIATE(name, provider) MP_PROF_SAMPLING_ALLOCATOR(name, provider)
INSTANTIATE(rt, ROUNDTRIP_PROVIDER);

#define N    2000
#define SIZE 1024

static int fail(const char *what, mp_prof_status s)
{
    fprintf(stderr, "%s: %s\n", what, mp_prof_strerror(s));
    return 1;
}

int main(void)
{
    static void *live[N];
    void *warm = rt_alloc(16, 8); /* the allocator has served an allocation */
    rt_dealloc(warm, 16, 8);

    mp_prof_config cfg;
    mp_prof_config_init(&cfg);
    cfg.sample_interval_bytes = 4096;
    cfg.seed = 42;
    mp_profiler *prof = NULL;
    mp_prof_status s = mp_profiler_start(&cfg, &prof);
    if (s != MP_PROF_OK)
        return fail("mp_profiler_start", s);

    for (int i = 0; i < N; i++) {
        live[i] = rt_alloc(SIZE, 16);
        if (live[i] == NULL)
            return fail("rt_alloc", MP_PROF_E_NOMEM);
        memset(live[i], i, SIZE);
    }
    for (int i = 0; i < N; i += 2)
        rt_dealloc(live[i], SIZE, 16);

    uint8_t *pprof = NULL;
    size_t len = 0;
    s = mp_profiler_report(prof, &pprof, &len);
    if (s != MP_PROF_OK)
        return fail("mp_profiler_report", s);
    mp_prof_symbol_quality q;
    s = mp_prof_classify_symbols(pprof, len, &q);
    if (s != MP_PROF_OK)
        return fail("mp_prof_classify_symbols (decoding the report)", s);
    mp_prof_stats st;
    mp_prof_diagnostics(&st);
    int ok = len > 0 && st.samples_taken > 0 && memmem(pprof, len, "inuse_space", 11) != NULL &&
             memmem(pprof, len, "alloc_space", 11) != NULL;
    printf("%s over %s: %zu-byte pprof, %llu samples, %llu live, symbols %s\n", mp_prof_version(),
           rt_name(), len, (unsigned long long)st.samples_taken,
           (unsigned long long)st.live_samples, mp_prof_symbol_quality_name(q));

    mp_prof_buffer_free(pprof);
    for (int i = 1; i < N; i += 2)
        rt_dealloc(live[i], SIZE, 16);
    mp_profiler_stop(prof);
    mp_profiler_free(prof);
    if (!ok) {
        fprintf(stderr, "the report is empty or lacks its sample types\n");
        return 1;
    }
    return 0;
}
