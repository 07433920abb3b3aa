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

/* --- a ramp, queried at each report's instant -------------------------------- */

#define RAMP_BLOCK    4096
#define RAMP_STEP     256 /* blocks per report: 1 MiB more live each time */
#define RAMP_REPORTS  5
#define RAMP_INTERVAL 4096
#define RAMP_EVERY_MS 1000                /* the agent's interval */
#define RAMP_SPREAD   (RAMP_EVERY_MS / 2) /* a report's stamp: its window's last 500 ms */

static void *ramp[RAMP_STEP * RAMP_REPORTS];

__attribute__((noinline, visibility("default"))) void pyro_mimprof_ramp_step(int k)
{
    for (int i = k * RAMP_STEP; i < (k + 1) * RAMP_STEP; i++)
        ramp[i] = tpa_alloc(RAMP_BLOCK, 16);
    __asm__ volatile("" ::: "memory");
}

static int64_t ceil_ms(int64_t ns) { return (ns + 999999) / 1000000; }

static int64_t total_of(const uint8_t *pprof, size_t len, const char *type)
{
    tp_profile p;
    cr_assert(tp_decode(pprof, len, &p));
    int t = tp_type_index(&p, type);
    int64_t v = t >= 0 ? tp_total_at(&p, t) : 0;
    tp_free(&p);
    return v;
}

/* A program whose heap grows by 1 MiB between reports, reported the way
 * the preload runtime does (a sink agent, the reports and peaks taken by
 * the program's side): the instant query just before each report's end
 * returns exactly that report's inuse, which is the heap of that instant
 * within the estimator's variance (5 sigma, fixed seed); the window's
 * query returns exactly its allocations and its peak. */
static void ramp_run(mp_pyro_protocol proto)
{
    ts_server s;
    if (!ts_start_any(&s, NULL))
        cr_skip_test("no server");
    tpa_dealloc(tpa_alloc(16, 8), 16, 8);
    mp_prof_config pc;
    mp_prof_config_init(&pc);
    pc.sample_interval_bytes = RAMP_INTERVAL;
    pc.seed = 25 + (unsigned)proto;
    mp_profiler *prof;
    cr_assert_eq(mp_profiler_start(&pc, &prof), MP_PROF_OK);
    char app[128], sel[200];
    snprintf(app, sizeof app, "mimprof-it.ramp.%s.%d.%" PRId64,
             proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest", (int)getpid(), now_ms());
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    mp_pyro_config *cfg = new_config(&s, app, proto);
    mp_pyro_config_set_upload_interval_ms(cfg, RAMP_EVERY_MS);
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(cfg, NULL, &a), MP_PYRO_OK);
    struct {
        int64_t from_ns, until_ns, inuse, alloc, peak, truth;
    } r[RAMP_REPORTS];
    int64_t prev = (int64_t)now_ms() * 1000000;
    for (int k = 0; k < RAMP_REPORTS; k++) {
        pyro_mimprof_ramp_step(k);
        /* the heap stays as it is for the window's last 600 ms: longer
         * than the spread, so the stamp's instant has the same truth */
        sleep_ms(600);
        uint8_t *buf, *peak;
        size_t len, plen;
        cr_assert_eq(mp_profiler_report(prof, &buf, &len), MP_PROF_OK);
        int64_t end = (int64_t)now_ms() * 1000000;
        cr_assert_eq(mp_profiler_report_peak(prof, &peak, &plen, NULL), MP_PROF_OK);
        r[k].from_ns = prev;
        r[k].until_ns = end;
        r[k].inuse = total_of(buf, len, "inuse_space");
        r[k].alloc = total_of(buf, len, "alloc_space");
        r[k].peak = total_of(peak, plen, "inuse_space");
        r[k].truth = (int64_t)(k + 1) * RAMP_STEP * RAMP_BLOCK;
        cr_assert_eq(mp_pyro_agent_submit(a, buf, len, prev, end), MP_PYRO_OK);
        cr_assert_eq(mp_pyro_agent_submit_as(a, peak, plen, prev, end, MP_PYRO_PEAK_PREFIX),
                     MP_PYRO_OK);
        mp_prof_buffer_free(buf);
        mp_prof_buffer_free(peak);
        prev = end;
    }
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    cr_expect_eq(st.uploaded, 2 * RAMP_REPORTS);
    const double p = -expm1(-(double)RAMP_BLOCK / RAMP_INTERVAL);
    for (int k = 0; k < RAMP_REPORTS; k++) {
        int64_t lo = ceil_ms(r[k].from_ns), hi = ceil_ms(r[k].until_ns) - 1;
        /* the instant: the window's last RAMP_SPREAD ms hold its stamp only */
        int64_t got = q_merge_total_wait(s.url, NULL, INUSE_SPACE, sel, hi + 1 - RAMP_SPREAD, hi,
                                         r[k].inuse, 60000);
        cr_expect_eq(got, r[k].inuse,
                     "report %d: inuse_space at its instant %" PRId64 ", reported %" PRId64, k, got,
                     r[k].inuse);
        double n = (double)(k + 1) * RAMP_STEP;
        double tol = 5 * RAMP_BLOCK * sqrt(n * (1 - p) / p);
        cr_expect(fabs((double)got - (double)r[k].truth) <= tol,
                  "report %d: inuse_space %" PRId64 ", the heap then %" PRId64 " (+-%.0f)", k, got,
                  r[k].truth, tol);
        /* the window [start, end): its allocations, its peak, nothing else */
        got = q_merge_total_wait(s.url, NULL, ALLOC_SPACE, sel, lo, hi, r[k].alloc, 60000);
        cr_expect_eq(got, r[k].alloc, "report %d: alloc_space of its window", k);
        tol = 5 * RAMP_BLOCK * sqrt(RAMP_STEP * (1 - p) / p);
        cr_expect(fabs((double)got - RAMP_STEP * RAMP_BLOCK) <= tol,
                  "report %d: allocated %" PRId64, k, got);
        got = q_merge_total_wait(s.url, NULL, PEAK_SPACE, sel, lo, hi, r[k].peak, 60000);
        cr_expect_eq(got, r[k].peak, "report %d: the window's peak", k);
    }
    cr_assert_eq(mp_profiler_stop(prof), MP_PROF_OK);
    mp_profiler_free(prof);
    for (int i = 0; i < RAMP_STEP * RAMP_REPORTS; i++)
        tpa_dealloc(ramp[i], RAMP_BLOCK, 16);
    mp_pyro_config_free(cfg);
    ts_stop(&s);
}

Test(mimprof_backend, ramp_instant_and_window_queries_ingest) { ramp_run(MP_PYRO_PROTOCOL_INGEST); }
Test(mimprof_backend, ramp_instant_and_window_queries_push) { ramp_run(MP_PYRO_PROTOCOL_PUSH); }
