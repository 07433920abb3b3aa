/* SPDX-License-Identifier: MIT */
/* The mimprof profiler backend end to end: a sampling allocator over
 * mimalloc in this test, a known population, an agent pushing to the
 * stand-in (or a real server), and the values queried back. Built only
 * when mimprof-profiling is available. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

#include "harness.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tpa, mp_sys_mimalloc);

#define N        50000
#define SIZE     1024
#define INTERVAL 8192

#define ALLOC_SPACE "memory:alloc_space:bytes:space:bytes"
#define INUSE_SPACE "memory:inuse_space:bytes:space:bytes"
#define PEAK_SPACE  "memory:peak_inuse_space:bytes:space:bytes"

static void *blocks[N];

__attribute__((noinline, visibility("default"))) void pyro_mimprof_population(void)
{
    for (int i = 0; i < N; i++)
        blocks[i] = tpa_alloc(SIZE, 16);
    __asm__ volatile("" ::: "memory");
}

static void free_population(void)
{
    for (int i = 0; i < N; i++)
        tpa_dealloc(blocks[i], SIZE, 16);
}

TestSuite(mimprof_backend, .timeout = 180);

static mp_pyro_config *new_config(ts_server *s, const char *app, mp_pyro_protocol proto)
{
    mp_pyro_config *cfg;
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_server(cfg, s->url), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_app_name(cfg, app), MP_PYRO_OK);
    mp_pyro_config_set_protocol(cfg, proto);
    mp_pyro_config_set_upload_interval_ms(cfg, 300);
    mp_pyro_config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    return cfg;
}

static double poll_sum(ts_server *s, const char *type, const char *sel, int64_t t0, double lo,
                       double hi)
{
    double got = -1;
    for (int i = 0; i < 60; i++) {
        got = q_series_sum(s->url, NULL, type, sel, t0 - 60000, now_ms() + 60000);
        if (got >= lo && got <= hi)
            break;
        sleep_ms(500);
    }
    return got;
}

#define SPIKE_BLOCK (64 << 10)
#define SPIKE_N     1920 /* 120 MiB */

/* What stays live while the spike comes and goes (a real program has
 * live objects: the unlabelled live samples that 1.13 kept). */
#define KEPT_N 200
static void *kept[KEPT_N];
__attribute__((noinline, visibility("default"))) void pyro_mimprof_kept(void)
{
    for (int i = 0; i < KEPT_N; i++)
        kept[i] = tpa_alloc(8192, 16);
    __asm__ volatile("" ::: "memory");
}

/* Allocation churn: everything freed before the report. */
__attribute__((noinline, visibility("default"))) void pyro_mimprof_freed_spike(void)
{
    static void *spike[SPIKE_N];
    for (int i = 0; i < SPIKE_N; i++)
        spike[i] = tpa_alloc(SPIKE_BLOCK, 16);
    __asm__ volatile("" ::: "memory");
    for (int i = 0; i < SPIKE_N; i++)
        tpa_dealloc(spike[i], SPIKE_BLOCK, 16);
}

/* A program that allocates and frees a 120 MiB spike: its stacks have no
 * live sample, which Pyroscope 1.13/1.14 dropped when the upload carried
 * the profiler's __delta__ sample label. Kept in full by every version. */
Test(mimprof_backend, freed_spike_kept_by_every_version)
{
    static const struct {
        const char *version;
        mp_pyro_protocol proto;
    } runs[] = {{"1.13", MP_PYRO_PROTOCOL_INGEST},
                {"1.13", MP_PYRO_PROTOCOL_PUSH},
                {"2.0", MP_PYRO_PROTOCOL_INGEST}};
    tpa_dealloc(tpa_alloc(16, 8), 16, 8);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        ts_server s;
        const char *args[] = {"--version", runs[r].version, NULL};
        if (!ts_start_any(&s, args))
            cr_skip_test("no server");
        mp_prof_config pc;
        mp_prof_config_init(&pc);
        pc.sample_interval_bytes = INTERVAL;
        pc.seed = 11 + r;
        mp_profiler *prof;
        cr_assert_eq(mp_profiler_start(&pc, &prof), MP_PROF_OK);
        pyro_mimprof_kept();
        pyro_mimprof_freed_spike();
        char app[128];
        snprintf(app, sizeof app, "mimprof-it.spike%zu.%d.%" PRId64, r, (int)getpid(), now_ms());
        mp_pyro_config *cfg = new_config(&s, app, runs[r].proto);
        mp_pyro_backend *be;
        cr_assert_eq(mp_pyro_backend_mimprof_attach(prof, &be), MP_PYRO_OK);
        mp_pyro_agent *a;
        int64_t t0 = now_ms();
        cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
        cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
        mp_pyro_stats st;
        mp_pyro_agent_stats(a, &st);
        mp_pyro_agent_free(a);
        mp_pyro_backend_free(be);
        cr_expect_eq(st.uploaded, st.reports_queued);
        char sel[200];
        snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
        double want = (double)SPIKE_N * SPIKE_BLOCK + KEPT_N * 8192, tol = 0.08;
        double alloc = poll_sum(&s, ALLOC_SPACE, sel, t0, want * (1 - tol), want * (1 + tol));
        cr_expect(fabs(alloc / want - 1) < tol, "%s: alloc_space %.0f, the spike %.0f",
                  runs[r].version, alloc, want);
        /* Each report goes with its window's peak (its own profile type):
         * the first window's holds the spike, the later ones what stayed. */
        cr_expect_eq(st.uploaded % 2, 0, "a peak per report");
        double reports = (double)(st.uploaded / 2);
        double peak_want = want + KEPT_N * 8192 * (reports - 1);
        double peak =
            poll_sum(&s, PEAK_SPACE, sel, t0, peak_want * (1 - tol), peak_want * (1 + tol));
        cr_expect(fabs(peak / peak_want - 1) < tol, "%s: peak_inuse_space %.0f, want %.0f",
                  runs[r].version, peak, peak_want);
        if (!s.external)
            cr_expect_eq(ts_summary(&s, "split_lost_samples"), 0, "%s %zu", runs[r].version, r);
        cr_expect_eq(mp_profiler_stop(prof), MP_PROF_OK);
        mp_profiler_free(prof);
        for (int i = 0; i < KEPT_N; i++)
            tpa_dealloc(kept[i], 8192, 16);
        mp_pyro_config_free(cfg);
        ts_stop(&s);
    }
}

/* The preload's path: a session the caller runs, attached to the agent. */
Test(mimprof_backend, attached_session_population)
{
    ts_server s;
    if (!ts_start_any(&s, NULL))
        cr_skip_test("no server");
    tpa_dealloc(tpa_alloc(16, 8), 16, 8); /* the allocator is observed */
    mp_prof_config pc;
    mp_prof_config_init(&pc);
    pc.sample_interval_bytes = INTERVAL;
    pc.seed = 7;
    pc.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    mp_profiler *prof;
    cr_assert_eq(mp_profiler_start(&pc, &prof), MP_PROF_OK);
    pyro_mimprof_population();

    char app[128];
    snprintf(app, sizeof app, "mimprof-it.mimprof.%d.%" PRId64, (int)getpid(), now_ms());
    mp_pyro_config *cfg = new_config(&s, app, MP_PYRO_PROTOCOL_PUSH);
    mp_pyro_backend *be;
    cr_assert_eq(mp_pyro_backend_mimprof_attach(prof, &be), MP_PYRO_OK);
    cr_expect_str_eq(mp_pyro_backend_name(be), "mimprof");
    mp_pyro_agent *a;
    int64_t t0 = now_ms();
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    sleep_ms(700);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    mp_pyro_backend_free(be);
    cr_expect_geq(st.uploaded, 2);
    cr_expect_eq(st.uploaded, st.reports_queued);

    char sel[200];
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    /* interval samples: the population appears once, in the first report */
    double want = (double)N * SIZE, tol = 0.08;
    double alloc = poll_sum(&s, ALLOC_SPACE, sel, t0, want * (1 - tol), want * (1 + tol));
    cr_expect(fabs(alloc / want - 1) < tol, "alloc_space %.0f, allocated %.0f", alloc, want);
    /* live samples: every report holds the whole population (and so does
     * its window's peak, uploaded next to it) */
    cr_expect_eq(st.uploaded % 2, 0, "a peak per report");
    double live_want = want * (double)(st.uploaded / 2);
    double inuse = poll_sum(&s, INUSE_SPACE, sel, t0, live_want * (1 - tol), live_want * (1 + tol));
    cr_expect(fabs(inuse / live_want - 1) < tol, "inuse_space %.0f over %llu reports, want %.0f",
              inuse, (unsigned long long)st.uploaded, live_want);
    tp_profile p;
    cr_assert(q_merge(s.url, NULL, ALLOC_SPACE, sel, t0 - 60000, now_ms() + 60000, &p));
    int t = tp_type_index(&p, "alloc_space");
    double in_fn = (double)tp_total_func(&p, t, "pyro_mimprof_population");
    cr_expect(in_fn > 0.9 * alloc, "allocation site named: %.0f of %.0f", in_fn, alloc);
    tp_free(&p);

    cr_assert_eq(mp_profiler_stop(prof), MP_PROF_OK);
    mp_profiler_free(prof);
    free_population();
    mp_pyro_config_free(cfg);
    ts_stop(&s);
}

/* The backend owning its session (mp_pyro_backend_mimprof_new). */
Test(mimprof_backend, owned_session)
{
    ts_server s;
    if (!ts_start_any(&s, NULL))
        cr_skip_test("no server");
    tpa_dealloc(tpa_alloc(16, 8), 16, 8);
    char app[128];
    snprintf(app, sizeof app, "mimprof-it.owned.%d.%" PRId64, (int)getpid(), now_ms());
    mp_pyro_config *cfg = new_config(&s, app, MP_PYRO_PROTOCOL_INGEST);
    mp_prof_config pc;
    mp_prof_config_init(&pc);
    pc.sample_interval_bytes = INTERVAL;
    mp_pyro_backend *be;
    cr_assert_eq(mp_pyro_backend_mimprof_new(&pc, &be), MP_PYRO_OK);
    mp_pyro_agent *a;
    int64_t t0 = now_ms();
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    /* a second session cannot start while the backend owns the recorder */
    mp_profiler *other;
    cr_expect_eq(mp_profiler_start(&pc, &other), MP_PROF_E_BUSY);
    pyro_mimprof_population();
    free_population();
    sleep_ms(400);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    /* stopped with the agent: the recorder is free again */
    cr_expect_eq(mp_profiler_start(&pc, &other), MP_PROF_OK);
    mp_profiler_free(other);
    cr_expect_geq(st.uploaded, 1);
    char sel[200];
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    double want = (double)N * SIZE;
    double alloc = poll_sum(&s, ALLOC_SPACE, sel, t0, want * 0.92, want * 1.08);
    cr_expect(fabs(alloc / want - 1) < 0.08, "alloc_space %.0f, allocated %.0f", alloc, want);
    mp_pyro_backend_free(be);
    mp_pyro_config_free(cfg);
    ts_stop(&s);
}
