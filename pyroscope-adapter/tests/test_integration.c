/* SPDX-License-Identifier: MIT */
/* End to end: the agent uploads, the server stores, the query API gives
 * back exactly what was sent, interval (alloc_*) and live (inuse_*)
 * values, in both storage modes (no double delta), with labels, tenant
 * and auth. Runs against a real Pyroscope when MIMPROF_PYROSCOPE_URL is
 * set (CI), else against the stand-in. */
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

#define LIST_WAIT_MS 240000

TestSuite(integration, .timeout = 600);

typedef struct run {
    char app[128];
    int64_t t0;
    int reports;
    int64_t alloc_space, inuse_space;
    int64_t small_alloc;
} run;

static void unique_app(char *out, size_t n, const char *what)
{
    snprintf(out, n, "mimprof-it.%s.%d.%" PRId64, what, (int)getpid(), now_ms());
}

/* Runs an agent with the fixed backend for a few intervals. */
static mp_pyro_stats upload_some(ts_server *s, mp_pyro_protocol proto, const char *tenant,
                                 const char *user, const char *pass, const char *token, run *r)
{
    unique_app(r->app, sizeof r->app, proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest");
    mp_pyro_config *cfg;
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_server(cfg, s->url), MP_PYRO_OK, "%s",
                 mp_pyro_config_error(cfg));
    cr_assert_eq(mp_pyro_config_set_app_name(cfg, r->app), MP_PYRO_OK);
    char tags[64];
    snprintf(tags, sizeof tags, "env=ci,run=r%d", (int)getpid());
    cr_assert_eq(mp_pyro_config_add_tags(cfg, tags), MP_PYRO_OK);
    mp_pyro_config_set_protocol(cfg, proto);
    if (tenant)
        mp_pyro_config_set_tenant(cfg, tenant);
    if (user)
        mp_pyro_config_set_basic_auth(cfg, user, pass);
    if (token)
        mp_pyro_config_set_bearer_token(cfg, token);
    mp_pyro_config_set_upload_interval_ms(cfg, 200);
    mp_pyro_config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    fixed_backend *fb;
    mp_pyro_backend *be = fixed_backend_new(&fb);
    mp_pyro_agent *a;
    r->t0 = now_ms();
    cr_assert_eq(mp_pyro_agent_start(cfg, be, &a), MP_PYRO_OK);
    sleep_ms(650);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    fixed_snapshot(fb, &r->reports, &r->alloc_space, &r->inuse_space);
    r->small_alloc = 0;
    for (int k = 0; k < r->reports; k++)
        r->small_alloc += 1000 * (k + 1);
    mp_pyro_backend_free(be);
    mp_pyro_config_free(cfg);
    return st;
}

static double poll_sum(ts_server *s, const char *tenant, const char *type, const char *sel,
                       int64_t t0, double want)
{
    double got = -1;
    for (int i = 0; i < 60; i++) {
        got = q_series_sum(s->url, tenant, type, sel, t0 - 60000, now_ms() + 60000);
        if (got == want)
            break;
        sleep_ms(500);
    }
    return got;
}

static void expect_round_trip(ts_server *s, const char *tenant, const run *r)
{
    char sel[256];
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", r->app);
    cr_expect_geq(r->reports, 3);
    double alloc = poll_sum(s, tenant, ALLOC_SPACE, sel, r->t0, (double)r->alloc_space);
    cr_expect_eq((int64_t)alloc, r->alloc_space,
                 "alloc_space: queried %.0f, sent %" PRId64 " (interval values, no double delta)",
                 alloc, r->alloc_space);
    double inuse = poll_sum(s, tenant, INUSE_SPACE, sel, r->t0, (double)r->inuse_space);
    cr_expect_eq((int64_t)inuse, r->inuse_space, "inuse_space: queried %.0f, sent %" PRId64, inuse,
                 r->inuse_space);
    int64_t want_objs = 0;
    for (int k = 0; k < r->reports; k++)
        want_objs += 10 * (k + 1) + 1;
    double objs = poll_sum(s, tenant, ALLOC_OBJECTS, sel, r->t0, (double)want_objs);
    cr_expect_eq((int64_t)objs, want_objs, "alloc_objects");

    tp_profile p;
    cr_assert(q_merge(s->url, tenant, ALLOC_SPACE, sel, r->t0 - 60000, now_ms() + 60000, &p));
    int t = tp_type_index(&p, "alloc_space");
    cr_expect_geq(t, 0);
    cr_expect_eq(tp_total_at(&p, t), r->alloc_space);
    cr_expect_eq(tp_total_func(&p, t, "alloc_small"), r->small_alloc,
                 "per-function values survive");
    cr_expect_eq(tp_total_func(&p, t, "alloc_big"), 100000 * (int64_t)r->reports);
    cr_expect_eq(tp_total_func(&p, t, "main"), r->alloc_space);
    tp_free(&p);

    /* label and type lists are eventually consistent (v2 lists a new
     * service's labels 1-3 minutes after its data is queryable) */
    int64_t a = r->t0 - 60000, b = now_ms() + 60000;
    cr_expect(q_label_has_wait(s->url, tenant, "service_name", r->app, a, b, LIST_WAIT_MS));
    cr_expect(q_label_has_wait(s->url, tenant, "env", "ci", a, b, LIST_WAIT_MS));
    cr_expect(q_has_type_wait(s->url, tenant, ALLOC_SPACE, a, b, LIST_WAIT_MS));
    cr_expect(q_has_type_wait(s->url, tenant, INUSE_SPACE, a, b, LIST_WAIT_MS));
}

static void expect_clean(const mp_pyro_stats *st)
{
    cr_expect_eq(st->uploaded, st->reports_queued);
    cr_expect_eq(st->dropped_rejected + st->dropped_queue_full + st->dropped_retry_exhausted +
                     st->dropped_stop_deadline,
                 0);
}

static void round_trip(mp_pyro_protocol proto, const char *storage)
{
    const char *args[] = {"--storage", storage, NULL};
    ts_server s;
    if (!ts_start_any(&s, args))
        cr_skip_test("no server: stand-in not available and MIMPROF_PYROSCOPE_URL unset");
    run r;
    mp_pyro_stats st = upload_some(&s, proto, NULL, NULL, NULL, NULL, &r);
    expect_clean(&st);
    expect_round_trip(&s, NULL, &r);
    ts_stop(&s);
}

/* Against a real server these use its own storage (CI runs a v1 and a v2
 * image); against the stand-in, v2. */
Test(integration, ingest) { round_trip(MP_PYRO_PROTOCOL_INGEST, "v2"); }
Test(integration, push) { round_trip(MP_PYRO_PROTOCOL_PUSH, "v2"); }

static void standin_only(void)
{
    if (ts_external_url())
        cr_skip_test("stand-in only (MIMPROF_PYROSCOPE_URL is set)");
    if (!ts_have_standin())
        cr_skip_test("stand-in not available");
}

Test(integration, ingest_standin_v1)
{
    standin_only();
    round_trip(MP_PYRO_PROTOCOL_INGEST, "v1");
}
Test(integration, push_standin_v1)
{
    standin_only();
    round_trip(MP_PYRO_PROTOCOL_PUSH, "v1");
}

/* The negative control: the same profiles pushed without __delta__="false"
 * (series or sample label) are delta'd again by a v1 ingester, so the
 * round-trip checks above would catch a missing label. */
Test(integration, v1_double_delta_is_detected)
{
    standin_only();
    const char *args[] = {"--storage", "v1", NULL};
    ts_server s;
    cr_assert(ts_start(&s, args));
    char app[128], url[600];
    unique_app(app, sizeof app, "neg");
    snprintf(url, sizeof url, "%s/push.v1.PusherService/Push", s.url);
    int64_t t0 = now_ms();
    int64_t sent = 0;
    for (int k = 0; k < 3; k++) {
        tp_heap_values v;
        fixed_values(k, &v);
        sent += v.alloc_space[0] + v.alloc_space[1];
        size_t n;
        uint8_t *p = tp_build_heap(&v, (t0 + k * 100) * 1000000, 100000000, false, &n);
        tbuf lab1 = {0}, lab2 = {0}, smp = {0}, series = {0}, req = {0}, resp = {0};
        pbw_str(&lab1, 1, "__name__");
        pbw_str(&lab1, 2, "memory");
        pbw_str(&lab2, 1, "service_name");
        pbw_str(&lab2, 2, app);
        pbw_bytes(&smp, 1, p, n);
        pbw_bytes(&series, 1, lab1.p, lab1.len);
        pbw_bytes(&series, 1, lab2.p, lab2.len);
        pbw_bytes(&series, 2, smp.p, smp.len);
        pbw_bytes(&req, 1, series.p, series.len);
        const char *h[] = {"Content-Type: application/proto", NULL};
        cr_expect_eq(http_post(url, h, req.p, req.len, &resp), 200);
        tbuf_free(&lab1);
        tbuf_free(&lab2);
        tbuf_free(&smp);
        tbuf_free(&series);
        tbuf_free(&req);
        tbuf_free(&resp);
        free(p);
    }
    char sel[200];
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    double got = q_series_sum(s.url, NULL, ALLOC_SPACE, sel, t0 - 60000, now_ms() + 60000);
    cr_expect_eq((int64_t)got, 2000, "server-side delta: first stored empty, then increases");
    cr_expect_neq((int64_t)got, sent);
    ts_stop(&s);
}

Test(integration, tenant)
{
    const char *args[] = {"--multitenancy", NULL};
    ts_server s;
    if (!ts_start_any(&s, args))
        cr_skip_test("no server");
    run r;
    mp_pyro_stats st = upload_some(&s, MP_PYRO_PROTOCOL_INGEST, "team-a", NULL, NULL, NULL, &r);
    expect_clean(&st);
    expect_round_trip(&s, "team-a", &r);
    if (!s.external) {
        char sel[256];
        snprintf(sel, sizeof sel, "{service_name=\"%s\"}", r.app);
        cr_expect_eq(
            q_series_sum(s.url, "team-b", ALLOC_SPACE, sel, r.t0 - 60000, now_ms() + 60000), 0,
            "another tenant sees nothing");
        cr_expect_eq(q_series_sum(s.url, NULL, ALLOC_SPACE, sel, r.t0 - 60000, now_ms() + 60000),
                     -1, "no tenant: 401");
        /* an agent without a tenant is refused (401) and counts it */
        run r2;
        st = upload_some(&s, MP_PYRO_PROTOCOL_PUSH, NULL, NULL, NULL, NULL, &r2);
        cr_expect_eq(st.uploaded, 0);
        cr_expect_eq(st.dropped_rejected, st.reports_queued);
        cr_expect_eq(st.fail_rejected, st.reports_queued);
    }
    ts_stop(&s);
}

Test(integration, basic_auth_through_a_proxy)
{
    standin_only();
    const char *args[] = {"--auth", "basic:123456:glc_token", NULL};
    ts_server s;
    cr_assert(ts_start(&s, args));
    run r;
    mp_pyro_stats st =
        upload_some(&s, MP_PYRO_PROTOCOL_PUSH, NULL, "123456", "glc_token", NULL, &r);
    expect_clean(&st);
    expect_round_trip(&s, NULL, &r);
    st = upload_some(&s, MP_PYRO_PROTOCOL_INGEST, NULL, "123456", "wrong", NULL, &r);
    cr_expect_eq(st.uploaded, 0);
    cr_expect_gt(st.fail_rejected, 0);
    ts_stop(&s);
}

Test(integration, bearer_auth_through_a_proxy)
{
    standin_only();
    const char *args[] = {"--auth", "bearer:s3cr3t", NULL};
    ts_server s;
    cr_assert(ts_start(&s, args));
    run r;
    mp_pyro_stats st = upload_some(&s, MP_PYRO_PROTOCOL_INGEST, NULL, NULL, NULL, "s3cr3t", &r);
    expect_clean(&st);
    expect_round_trip(&s, NULL, &r);
    ts_stop(&s);
}
