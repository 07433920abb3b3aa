/* SPDX-License-Identifier: MIT */
/* What real Pyroscope servers do that a naive uploader loses data to,
 * against the stand-in in each version mode (--version 1.13 and 2.0) and
 * both protocols, or against the real server of MIMPROF_PYROSCOPE_URL
 * (CI: grafana/pyroscope 1.13.4 and 2.0.2; the fault case is skipped):
 *  - a freed spike: stacks whose objects were all freed by report time
 *    (1.13/1.14 split a profile by sample labels and drop them);
 *  - /ingest's 422 for a rate limit, retried and delivered;
 *  - 65,536 live stacks, more than the server's samples and size limits,
 *    delivered with their totals exact. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define ALLOC_SPACE   "memory:alloc_space:bytes:space:bytes"
#define ALLOC_OBJECTS "memory:alloc_objects:count:space:bytes"
#define INUSE_SPACE   "memory:inuse_space:bytes:space:bytes"
#define INUSE_OBJECTS "memory:inuse_objects:count:space:bytes"
#define SPIKE         (123LL << 20) /* the measurement: 123 MiB freed */
#define WIDE_BITS     16

TestSuite(real_servers, .timeout = 300);

static const char *const versions[] = {"1.13", "2.0"};
static const mp_pyro_protocol protocols[] = {MP_PYRO_PROTOCOL_INGEST, MP_PYRO_PROTOCOL_PUSH};

typedef struct env {
    ts_server srv;
    mp_pyro_config *cfg;
    char app[128];
    char sel[160];
    int64_t t0;
} env;

static void start(env *e, const char *version, mp_pyro_protocol proto, const char *what)
{
    const char *args[] = {"--version", version, NULL};
    if (!ts_external_url() && !ts_have_standin())
        cr_skip_test("stand-in not available");
    cr_assert(ts_start_any(&e->srv, args));
    snprintf(e->app, sizeof e->app, "mimprof-rs.%s.%s.%s.%d.%" PRId64, what,
             version[0] == '1' ? "v113" : "v20", proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest",
             (int)getpid(), now_ms());
    snprintf(e->sel, sizeof e->sel, "{service_name=\"%s\"}", e->app);
    cr_assert_eq(mp_pyro_config_new(&e->cfg), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_server(e->cfg, e->srv.url), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_app_name(e->cfg, e->app), MP_PYRO_OK);
    mp_pyro_config_set_protocol(e->cfg, proto);
    mp_pyro_config_set_logger(e->cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    mp_pyro_retry_policy p = {
        .max_attempts = 40, .initial_backoff_ms = 200, .max_backoff_ms = 2000, .budget_ms = 120000};
    mp_pyro_config_set_retry(e->cfg, &p);
    mp_pyro_config_set_flush_deadline_ms(e->cfg, 180000);
    e->t0 = now_ms();
}

static void finish(env *e)
{
    mp_pyro_config_free(e->cfg);
    ts_stop(&e->srv);
}

/* `n` reports of one window each through a sink agent (what the preload
 * runtime does), back to back. */
static mp_pyro_stats submit_n(env *e, const uint8_t *pprof, size_t len, int64_t from_ns, int n)
{
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(e->cfg, NULL, &a), MP_PYRO_OK);
    for (int i = 0; i < n; i++)
        cr_assert_eq(mp_pyro_agent_submit(a, pprof, len, from_ns, from_ns + 1000000000),
                     MP_PYRO_OK);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    cr_expect_eq(st.uploaded, st.reports_queued, "delivered: %llu of %llu",
                 (unsigned long long)st.uploaded, (unsigned long long)st.reports_queued);
    cr_expect_eq(st.dropped_rejected + st.dropped_queue_full + st.dropped_retry_exhausted +
                     st.dropped_stop_deadline,
                 0);
    return st;
}

static mp_pyro_stats submit(env *e, const uint8_t *pprof, size_t len, int64_t from_ns)
{
    return submit_n(e, pprof, len, from_ns, 1);
}

/* A real server stores asynchronously: poll until the value or 30 s. */
static int64_t sum_of(env *e, const char *type, int64_t want)
{
    double got = -1;
    for (int i = 0; i < 60; i++) {
        got = q_series_sum(e->srv.url, NULL, type, e->sel, e->t0 - 60000, now_ms() + 60000);
        if ((int64_t)got == want || !e->srv.external)
            break;
        sleep_ms(500);
    }
    return (int64_t)got;
}

static void freed_spike(const char *version, mp_pyro_protocol proto)
{
    env e;
    start(&e, version, proto, "spike");
    /* alloc_small still live; alloc_big allocated and freed within the
     * window: an interval sample (labelled) and no live sample */
    tp_heap_values v = {.alloc_objects = {10, 120},
                        .alloc_space = {1000, SPIKE},
                        .inuse_objects = {5, 0},
                        .inuse_space = {500, 0}};
    int64_t from = (now_ms() - 1000) * 1000000;
    size_t len;
    uint8_t *p = tp_build_heap(&v, from, 1000000000, true, &len);
    submit(&e, p, len, from);
    free(p);
    cr_expect_eq(sum_of(&e, ALLOC_SPACE, 1000 + SPIKE), 1000 + SPIKE,
                 "%s %s: the freed spike's alloc_space is kept in full", version,
                 proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest");
    cr_expect_eq(sum_of(&e, ALLOC_OBJECTS, 130), 130);
    cr_expect_eq(sum_of(&e, INUSE_SPACE, 500), 500);
    if (!e.srv.external)
        cr_expect_eq(ts_summary(&e.srv, "split_lost_samples"), 0);
    finish(&e);
}

Test(real_servers, freed_spike_kept_in_full)
{
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 0; k < 2; k++)
            freed_spike(versions[i], protocols[k]);
}

Test(real_servers, rate_limit_422_retried_and_delivered)
{
    if (ts_external_url())
        cr_skip_test("needs the stand-in's fault mode");
    for (size_t i = 0; i < 2; i++) {
        for (size_t k = 0; k < 2; k++) {
            env e;
            start(&e, versions[i], protocols[k], "ratelimit");
            cr_assert(ts_post(&e.srv, "/fault", "{\"mode\": \"ratelimit\", \"count\": 1}"));
            tp_heap_values v;
            fixed_values(0, &v);
            int64_t from = (now_ms() - 1000) * 1000000;
            size_t len;
            uint8_t *p = tp_build_heap(&v, from, 1000000000, true, &len);
            mp_pyro_stats st = submit(&e, p, len, from);
            free(p);
            cr_expect_eq(st.fail_rate_limited, 1);
            cr_expect_eq(st.retries, 1);
            cr_expect_eq(ts_summary(&e.srv, k == 0 ? "status_422" : "status_429"), 1,
                         "the real server's answer on %s", k == 0 ? "/ingest" : "Push");
            cr_expect_eq(sum_of(&e, ALLOC_SPACE, 101000), 101000);
            finish(&e);
        }
    }
}

/* MIMPROF_PYRO_WIDE_REPORTS reports (default 1) of the same stacks: CI
 * sends 3 to a real server, 6.6 MB within a second, well past its 2 MiB
 * burst and 4 MB/s, so that its own rate limiter answers (422 on
 * /ingest, 429 on Push) and the retries deliver everything. */
static void wide(const char *version, mp_pyro_protocol proto)
{
    env e;
    start(&e, version, proto, "wide");
    int reports = (int)ts_env_double("MIMPROF_PYRO_WIDE_REPORTS", 1);
    int64_t from = (now_ms() - 1000) * 1000000;
    size_t len;
    uint8_t *p = tp_build_wide(WIDE_BITS, 4096, from, &len);
    mp_pyro_stats st = submit_n(&e, p, len, from, reports);
    free(p);
    cr_expect_geq(st.parts_split, 4 * (uint64_t)reports,
                  "65,536 stacks in at least 5 requests of 16,000");
    const int64_t n = ((int64_t)1 << WIDE_BITS) * reports;
    cr_expect_eq(sum_of(&e, INUSE_SPACE, n * 4096), n * 4096, "inuse_space exact");
    cr_expect_eq(sum_of(&e, INUSE_OBJECTS, n), n, "inuse_objects exact");
    cr_expect_eq(sum_of(&e, ALLOC_SPACE, n * 4096), n * 4096, "alloc_space exact");
    if (!e.srv.external) {
        cr_expect_eq(ts_summary(&e.srv, "accepted"), (long)st.uploaded);
        cr_expect_eq(ts_summary(&e.srv, "status_400") + ts_summary(&e.srv, "status_413"), 0);
    }
    finish(&e);
}

Test(real_servers, wide_report_within_limits_totals_exact, .timeout = 600)
{
    for (size_t i = 0; i < 2; i++)
        for (size_t k = 0; k < 2; k++)
            wide(versions[i], protocols[k]);
}
