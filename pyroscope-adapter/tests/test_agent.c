/* SPDX-License-Identifier: MIT */
/* The agent against the stand-in's fault modes: retries, timeouts,
 * resets, rejections, queue overflow, an outage with nothing lost, the
 * spool across a restart. Stand-in only (faults need its control port);
 * skipped when MIMPROF_PYROSCOPE_URL points at a real server. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static ts_server srv;
static mp_pyro_config *cfg;
static fixed_backend *fb;
static mp_pyro_backend *be;

static void setup(void)
{
    if (ts_external_url())
        cr_skip_test("fault-mode tests need the stand-in (MIMPROF_PYROSCOPE_URL is set)");
    if (!ts_have_standin())
        cr_skip_test("stand-in not available");
    cr_assert(ts_start(&srv, NULL));
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    mp_pyro_config_set_server(cfg, srv.url);
    mp_pyro_config_set_app_name(cfg, "agent-test");
    mp_pyro_config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    mp_pyro_retry_policy p = {
        .max_attempts = 20, .initial_backoff_ms = 20, .max_backoff_ms = 100, .budget_ms = 20000};
    mp_pyro_config_set_retry(cfg, &p);
    be = fixed_backend_new(&fb);
}

static void teardown(void)
{
    mp_pyro_backend_free(be);
    mp_pyro_config_free(cfg);
    ts_stop(&srv);
}

TestSuite(agent, .init = setup, .fini = teardown, .timeout = 120);

static void expect_accounted(const mp_pyro_stats *s)
{
    uint64_t ended = s->uploaded + s->dropped_queue_full + s->dropped_rejected +
                     s->dropped_retry_exhausted + s->dropped_stop_deadline + s->dropped_spool_io +
                     s->spooled + s->queue_depth;
    cr_expect_eq(s->reports_queued, ended,
                 "every profile is accounted for: queued %llu, ended %llu",
                 (unsigned long long)s->reports_queued, (unsigned long long)ended);
}

/* The agent reports at wall-clock multiples of its interval (reporter.c),
 * so a run meant to be one window ending at stop must not straddle a
 * boundary: it uses the longest interval (30 min) and, started within
 * seconds of a boundary, first waits it out. (With a 60 s interval a
 * 250 ms run straddled a minute boundary about once in 240 runs: two
 * reports.) */
#define ONE_WINDOW 1800000

static void clear_of_boundary(int interval_ms, int run_ms)
{
    if (interval_ms != ONE_WINDOW)
        return;
    while (ONE_WINDOW - now_ms() % ONE_WINDOW < run_ms + 10000)
        sleep_ms(200);
}

static mp_pyro_stats run_once(int interval_ms, int run_ms, mp_pyro_status want_stop)
{
    mp_pyro_agent *a;
    mp_pyro_config_set_upload_interval_ms(cfg, (uint32_t)interval_ms);
    clear_of_boundary(interval_ms, run_ms);
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    sleep_ms(run_ms);
    cr_expect_eq(mp_pyro_agent_stop(a), want_stop);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    expect_accounted(&st);
    return st;
}

Test(agent, stop_flushes_the_last_interval)
{
    mp_pyro_stats st = run_once(ONE_WINDOW, 200, MP_PYRO_OK);
    cr_expect_eq(st.reports, 1);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(ts_summary(&srv, "accepted"), 1);
    cr_expect(fb->started && fb->stopped);
    cr_expect_eq(fb->nwindows, 1);
    cr_expect_geq(fb->windows[0].until_nanos - fb->windows[0].from_nanos, 190000000);
}

/* 500 as a proxy in front of the server answers; the rate limit as the
 * real /ingest answers it: 422 "pushing IngestInput-pprof failed
 * resource_exhausted: ..." (Push: 429), retried like a 429. */
Test(agent, retries_500_and_rate_limit)
{
    ts_post(&srv, "/fault", "{\"mode\": \"500\", \"count\": 2}");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(st.fail_server, 2);
    cr_expect_eq(st.retries, 2);
    cr_expect_eq(st.requests, 3);
    ts_post(&srv, "/fault", "{\"mode\": \"ratelimit\", \"count\": 1}");
    st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(st.fail_rate_limited, 1);
    cr_expect_eq(st.dropped_rejected, 0);
    cr_expect_eq(ts_summary(&srv, "status_422"), 1);
    cr_expect_eq(ts_summary(&srv, "accepted"), 2);
    mp_pyro_config_set_protocol(cfg, MP_PYRO_PROTOCOL_PUSH);
    ts_post(&srv, "/fault", "{\"mode\": \"ratelimit\", \"count\": 1}");
    st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(st.fail_rate_limited, 1);
    cr_expect_eq(ts_summary(&srv, "status_429"), 1);
    cr_expect_eq(ts_summary(&srv, "accepted"), 3);
}

/* Pyroscope 2.0 answers 408 when reading the request body fails (a slow
 * or broken client side of the connection): transient, so retried like a
 * timeout, never dropped as a rejection. */
Test(agent, request_timeout_408_is_retried)
{
    ts_post(&srv, "/fault", "{\"mode\": \"bodyread\", \"count\": 1}");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(ts_summary(&srv, "status_408"), 1);
    cr_expect_eq(st.fail_timeout, 1);
    cr_expect_eq(st.dropped_rejected, 0);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(ts_summary(&srv, "accepted"), 1);
}

Test(agent, timeout_then_retry)
{
    /* the retry has the same request timeout: 1.5 s, so that a loaded
     * machine's slow (but not faulted) answer does not time out too */
    mp_pyro_config_set_timeouts_ms(cfg, 1000, 1500);
    ts_post(&srv, "/fault", "{\"mode\": \"slow\", \"slow_ms\": 6000, \"count\": 1}");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.fail_timeout, 1);
    cr_expect_eq(st.uploaded, 1);
}

Test(agent, connection_reset_then_retry)
{
    ts_post(&srv, "/fault", "{\"mode\": \"reset\", \"count\": 1}");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.fail_connect, 1);
    cr_expect_eq(st.uploaded, 1);
    cr_expect_eq(ts_summary(&srv, "accepted"), 1);
}

Test(agent, other_4xx_not_retried_with_server_message)
{
    ts_post(&srv, "/config", "{\"body_limit\": 100}");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.requests, 1);
    cr_expect_eq(st.retries, 0);
    cr_expect_eq(st.fail_rejected, 1);
    cr_expect_eq(st.dropped_rejected, 1);
    mp_pyro_agent *a;
    mp_pyro_config_set_upload_interval_ms(cfg, ONE_WINDOW);
    clear_of_boundary(ONE_WINDOW, 1000);
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    mp_pyro_agent_stop(a);
    char msg[512];
    cr_expect_eq(mp_pyro_agent_last_error(a, msg, sizeof msg), MP_PYRO_E_HTTP_REJECTED);
    cr_expect(strstr(msg, "413") && strstr(msg, "request body too large"), "%s", msg);
    mp_pyro_agent_free(a);
}

Test(agent, queue_overflow_counted)
{
    ts_post(&srv, "/fault", "{\"mode\": \"down\"}");
    mp_pyro_config_set_queue_capacity(cfg, 2);
    mp_pyro_config_set_flush_deadline_ms(cfg, 50);
    mp_pyro_stats st = run_once(30, 450, MP_PYRO_E_DEADLINE);
    cr_expect_geq(st.reports_queued, 8);
    cr_expect_geq(st.dropped_queue_full, st.reports_queued - 3);
    cr_expect_leq(st.queue_high_water, 3);
    cr_expect_eq(st.uploaded, 0);
    cr_expect_eq(st.queue_depth, 0);
    cr_expect_gt(st.dropped_stop_deadline, 0);
}

Test(agent, backend_failure_counted)
{
    fb->fail_at = 0;
    mp_pyro_stats st = run_once(50, 180, MP_PYRO_OK);
    cr_expect_eq(st.reports_failed, 1);
    cr_expect_eq(st.reports, st.reports_queued + 1);
    cr_expect_eq(st.uploaded, st.reports_queued);
}

Test(agent, backend_serves_one_agent)
{
    mp_pyro_agent *a, *b = NULL;
    mp_pyro_config_set_upload_interval_ms(cfg, ONE_WINDOW);
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_agent_start(cfg, be, &b), MP_PYRO_E_STATE);
    mp_pyro_agent_free(a);
    cr_expect_eq(mp_pyro_agent_start(cfg, be, &b), MP_PYRO_OK,
                 "free after stop releases the backend");
    mp_pyro_agent_free(b);
}

Test(agent, outage_then_nothing_lost, .timeout = 400)
{
    /* The scenario is a 30 s outage; MIMPROF_PYRO_OUTAGE_S sets it
     * (CI runs 30). The default is shorter: the code paths (refused
     * connections, backoff capped at max, queue growth, catch-up) are the
     * same at any length. */
    double outage_s = ts_env_double("MIMPROF_PYRO_OUTAGE_S", 3.0);
    int interval = (int)ts_env_double("MIMPROF_PYRO_OUTAGE_INTERVAL_MS", 250);
    mp_pyro_config_set_queue_capacity(cfg, (uint32_t)(outage_s * 1000 / interval) + 32);
    mp_pyro_retry_policy p = {.max_attempts = 1000,
                              .initial_backoff_ms = 100,
                              .max_backoff_ms = 1000,
                              .budget_ms = (uint32_t)(outage_s * 1000) + 60000};
    mp_pyro_config_set_retry(cfg, &p);
    mp_pyro_config_set_upload_interval_ms(cfg, (uint32_t)interval);
    mp_pyro_agent *a;
    int64_t t0 = now_ms();
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    sleep_ms(3 * interval);
    ts_post(&srv, "/fault", "{\"mode\": \"down\"}");
    sleep_ms((int)(outage_s * 1000));
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    cr_expect_gt(st.queue_depth, 1, "profiles waited during the outage");
    ts_post(&srv, "/fault", "{\"mode\": \"none\"}");
    for (int i = 0; i < 100; i++) {
        mp_pyro_agent_stats(a, &st);
        if (st.queue_depth == 0)
            break;
        sleep_ms(100);
    }
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    expect_accounted(&st);
    cr_expect_gt(st.fail_connect, 0, "the outage was seen");
    cr_expect_eq(st.uploaded, st.reports_queued, "nothing lost");
    cr_expect_eq(st.dropped_queue_full + st.dropped_retry_exhausted + st.dropped_stop_deadline, 0);
    int reports;
    int64_t alloc, inuse;
    fixed_snapshot(fb, &reports, &alloc, &inuse);
    cr_expect_eq((uint64_t)reports, st.reports_queued);
    cr_expect_eq(ts_records(&srv, "memory:alloc_space:bytes:space:bytes"), (long)st.uploaded,
                 "one stored profile per report, no duplicates");
    double got = q_series_sum(srv.url, NULL, "memory:alloc_space:bytes:space:bytes",
                              "{service_name=\"agent-test\"}", t0 - 1000, now_ms() + 1000);
    cr_expect_eq((int64_t)got, alloc, "alloc_space queried back %f, sent %lld", got,
                 (long long)alloc);
}

static char *mktemp_dir(void)
{
    char *d = strdup("/tmp/mimprof-spool-XXXXXX");
    cr_assert(mkdtemp(d));
    return d;
}

static void rm_dir(const char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    cr_expect_eq(system(cmd), 0);
}

Test(agent, spool_resent_after_restart)
{
    char *dir = mktemp_dir();
    ts_post(&srv, "/fault", "{\"mode\": \"down\"}");
    mp_pyro_config_set_spool(cfg, dir, 0, 0);
    mp_pyro_config_set_queue_capacity(cfg, 3);
    mp_pyro_config_set_flush_deadline_ms(cfg, 100);
    mp_pyro_stats st1 = run_once(50, 400, MP_PYRO_E_DEADLINE);
    cr_expect_gt(st1.spooled, 3);
    cr_expect_eq(st1.spooled, st1.reports_queued, "overflow and the deadline went to the spool");
    cr_expect_eq(st1.spool_files, st1.spooled);
    int64_t sent_alloc;
    fixed_snapshot(fb, NULL, &sent_alloc, NULL);

    /* "restart": a new backend and agent on the same spool, server back */
    ts_post(&srv, "/fault", "{\"mode\": \"none\"}");
    mp_pyro_backend_free(be);
    be = fixed_backend_new(&fb);
    fb->empty = true;
    mp_pyro_config_set_upload_interval_ms(cfg, ONE_WINDOW);
    clear_of_boundary(ONE_WINDOW, 10000);
    mp_pyro_agent *a, *other = NULL;
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    fixed_backend *fb2;
    mp_pyro_backend *be2 = fixed_backend_new(&fb2);
    cr_expect_eq(mp_pyro_agent_start(cfg, be2, &other), MP_PYRO_E_SPOOL_LOCKED);
    mp_pyro_stats st2;
    for (int i = 0; i < 200; i++) {
        mp_pyro_agent_stats(a, &st2);
        if (st2.spool_files == 0)
            break;
        sleep_ms(50);
    }
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_agent_stats(a, &st2);
    mp_pyro_agent_free(a);
    mp_pyro_backend_free(be2);
    cr_expect_eq(st2.spool_resent, st1.spooled);
    cr_expect_eq(st2.spool_files, 0);
    cr_expect_eq(ts_records(&srv, "memory:alloc_space:bytes:space:bytes"), (long)st1.spooled);
    double got = q_series_sum(srv.url, NULL, "memory:alloc_space:bytes:space:bytes",
                              "{service_name=\"agent-test\"}", now_ms() - 60000, now_ms() + 1000);
    cr_expect_eq((int64_t)got, sent_alloc);
    rm_dir(dir);
    free(dir);
}

static mp_pyro_stats wait_spool(mp_pyro_config *c, uint64_t files, int ms)
{
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(c, be, &a), MP_PYRO_OK);
    mp_pyro_stats st;
    for (int i = 0; i < ms / 50; i++) {
        mp_pyro_agent_stats(a, &st);
        if (st.spool_files == files)
            break;
        sleep_ms(50);
    }
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    return st;
}

static bool dir_holds(const char *dir, const char *needle)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -rqF '%s' '%s'", needle, dir);
    return system(cmd) == 0;
}

/* A spooled profile keeps the server, the tenant and an identity of the
 * credentials it was meant for (a salted hash, never the secret) and is
 * resent only by an agent with the same; any other agent keeps it and
 * counts it (it used to go into the next run's tenant). */
Test(agent, spool_resent_only_to_its_tenant_and_credentials)
{
    char *dir = mktemp_dir();
    ts_post(&srv, "/config", "{\"multitenancy\": true}");
    ts_post(&srv, "/fault", "{\"mode\": \"down\"}");
    mp_pyro_config_set_spool(cfg, dir, 0, 0);
    mp_pyro_config_set_flush_deadline_ms(cfg, 100);
    mp_pyro_config_set_tenant(cfg, "team-a");
    mp_pyro_config_set_basic_auth(cfg, "stack-a", "secret-a");
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_E_DEADLINE);
    cr_assert_eq(st.spooled, 1);
    int64_t sent_alloc;
    fixed_snapshot(fb, NULL, &sent_alloc, NULL);
    cr_expect(!dir_holds(dir, "secret-a"), "the spool never holds the secret");
    cr_expect(dir_holds(dir, "tenant team-a"));
    ts_post(&srv, "/fault", "{\"mode\": \"none\"}");
    fb->empty = true;
    mp_pyro_config_set_upload_interval_ms(cfg, ONE_WINDOW);
    clear_of_boundary(ONE_WINDOW, 10000);

    /* another tenant and credentials; then team-a with another password */
    const char *others[][3] = {{"team-b", "stack-b", "secret-b"}, {"team-a", "stack-a", "another"}};
    for (int i = 0; i < 2; i++) {
        mp_pyro_config_set_tenant(cfg, others[i][0]);
        mp_pyro_config_set_basic_auth(cfg, others[i][1], others[i][2]);
        st = wait_spool(cfg, 0, 2000);
        cr_expect_eq(st.spool_files, 1, "%s kept the profile", others[i][0]);
        cr_expect_eq(st.spool_foreign, 1);
        cr_expect_eq(st.spool_resent, 0);
        cr_expect_eq(ts_summary(&srv, "accepted"), 0, "nothing sent under %s", others[i][0]);
    }

    mp_pyro_config_set_tenant(cfg, "team-a");
    mp_pyro_config_set_basic_auth(cfg, "stack-a", "secret-a");
    st = wait_spool(cfg, 0, 10000);
    cr_expect_eq(st.spool_resent, 1);
    cr_expect_eq(st.spool_files, 0);
    int64_t t = now_ms();
    double a = q_series_sum(srv.url, "team-a", "memory:alloc_space:bytes:space:bytes",
                            "{service_name=\"agent-test\"}", t - 60000, t + 1000);
    double b = q_series_sum(srv.url, "team-b", "memory:alloc_space:bytes:space:bytes",
                            "{service_name=\"agent-test\"}", t - 60000, t + 1000);
    cr_expect_eq((int64_t)a, sent_alloc, "delivered into its own tenant");
    cr_expect_eq((int64_t)b, 0);
    rm_dir(dir);
    free(dir);
}

/* An ingester that stays unavailable: /ingest says so with a 422
 * (pushing IngestInput-pprof failed unavailable: ...), retried as a 5xx. */
Test(agent, retry_budget_spent_goes_to_spool)
{
    char *dir = mktemp_dir();
    ts_post(&srv, "/fault", "{\"mode\": \"unavailable\"}");
    mp_pyro_retry_policy p = {
        .max_attempts = 2, .initial_backoff_ms = 10, .max_backoff_ms = 10, .budget_ms = 1000};
    mp_pyro_config_set_retry(cfg, &p);
    mp_pyro_config_set_spool(cfg, dir, 0, 0);
    mp_pyro_stats st = run_once(ONE_WINDOW, 50, MP_PYRO_OK);
    cr_expect_eq(st.fail_server, 2);
    cr_expect_eq(st.spooled, 1);
    cr_expect_eq(st.dropped_retry_exhausted, 0);
    rm_dir(dir);
    free(dir);
}

/* Sink mode: the LD_PRELOAD runtime takes the reports itself and hands
 * them over with mp_pyro_agent_submit(). */
Test(agent, sink_submitted_profiles)
{
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(cfg, NULL, &a), MP_PYRO_OK);
    int64_t t = (now_ms() - 10000) * 1000000;
    int64_t sent = 0;
    for (int k = 0; k < 4; k++) {
        tp_heap_values v;
        fixed_values(k, &v);
        sent += v.alloc_space[0] + v.alloc_space[1];
        size_t n;
        uint8_t *p = tp_build_heap(&v, t + k * 1000000000LL, 1000000000LL, true, &n);
        cr_expect_eq(
            mp_pyro_agent_submit(a, p, n, t + k * 1000000000LL, t + (k + 1) * 1000000000LL),
            MP_PYRO_OK);
        free(p);
    }
    cr_expect_eq(mp_pyro_agent_submit(a, NULL, 0, t, t), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_agent_submit(a, NULL, 0, t, t - 1), MP_PYRO_E_INVALID_ARGUMENT);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    uint8_t b = 0;
    cr_expect_eq(mp_pyro_agent_submit(a, &b, 1, t, t), MP_PYRO_E_STATE);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    expect_accounted(&st);
    cr_expect_eq(st.reports, 5);
    cr_expect_eq(st.reports_empty, 1);
    cr_expect_eq(st.uploaded, 4);
    cr_expect_eq(ts_records(&srv, "memory:alloc_space:bytes:space:bytes"), 4);
    double got = q_series_sum(srv.url, NULL, "memory:alloc_space:bytes:space:bytes",
                              "{service_name=\"agent-test\"}", t / 1000000 - 1000, now_ms() + 1000);
    cr_expect_eq((int64_t)got, sent);
    cr_expect(q_label_has(srv.url, NULL, "pyroscope_spy", "mimprof", t / 1000000 - 1000,
                          now_ms() + 1000));
}

/* What the preload does: configuration from PYROSCOPE_* only. */
Test(agent, sink_from_environment)
{
    setenv("PYROSCOPE_SERVER_ADDRESS", srv.url, 1);
    setenv("PYROSCOPE_APPLICATION_NAME", "from-env", 1);
    setenv("PYROSCOPE_TAGS", "origin=env", 1);
    setenv("MIMPROF_PYROSCOPE_PROTOCOL", "push", 1);
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start_from_env(NULL, &a), MP_PYRO_OK);
    tp_heap_values v;
    fixed_values(0, &v);
    int64_t t = now_ms() * 1000000;
    size_t n;
    uint8_t *p = tp_build_heap(&v, t, 1000000, true, &n);
    cr_expect_eq(mp_pyro_agent_submit(a, p, n, t, t + 1000000), MP_PYRO_OK);
    free(p);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_agent_free(a);
    cr_expect(q_label_has(srv.url, NULL, "origin", "env", now_ms() - 60000, now_ms() + 1000));
    cr_expect(
        q_label_has(srv.url, NULL, "service_name", "from-env", now_ms() - 60000, now_ms() + 1000));
    unsetenv("PYROSCOPE_SERVER_ADDRESS");
    unsetenv("PYROSCOPE_APPLICATION_NAME");
    unsetenv("PYROSCOPE_TAGS");
    unsetenv("MIMPROF_PYROSCOPE_PROTOCOL");
}

/* A retry whose backoff ends after the flush deadline gets one last
 * attempt at stop instead of none. */
Test(agent, stop_does_not_wait_out_a_long_backoff)
{
    ts_post(&srv, "/fault", "{\"mode\": \"500\", \"count\": 1}");
    mp_pyro_retry_policy p = {.max_attempts = 5,
                              .initial_backoff_ms = 60000,
                              .max_backoff_ms = 60000,
                              .budget_ms = 600000};
    mp_pyro_config_set_retry(cfg, &p);
    mp_pyro_config_set_flush_deadline_ms(cfg, 3000);
    mp_pyro_config_set_upload_interval_ms(cfg, 100);
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    sleep_ms(250); /* the first profile failed (500) and waits 30..60 s */
    int64_t t0 = now_ms();
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    /* the backoff is 30..60 s: a bound far below it and far above a loaded
     * machine's slowest last attempt (the flush deadline is 3 s) */
    cr_expect_lt(now_ms() - t0, 20000, "stop did not wait for the backoff");
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    expect_accounted(&st);
    cr_expect_eq(st.fail_server, 1);
    cr_expect_eq(st.uploaded, st.reports_queued);
}
