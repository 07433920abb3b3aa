/* SPDX-License-Identifier: MIT */
/* Exact requests, byte for byte, as a raw capture server receives them:
 * path, query, headers, multipart layout, gzip, protobuf fields; auth,
 * tenant, redirects. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static cap_server cap;
static mp_pyro_config *cfg;
static uint8_t *prof;
static size_t prof_len;
static char err[1024];

static void setup(void)
{
    cr_assert(cap_start(&cap, 200, NULL, ""));
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_server(cfg, cap.url), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_app_name(cfg, "svc"), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_add_tags(cfg, "team=core,env=prod"), MP_PYRO_OK);
    tp_heap_values v;
    fixed_values(0, &v);
    prof = tp_build_heap(&v, 1700000000000000000, 10000000000, true, &prof_len);
}

static void teardown(void)
{
    cap_stop(&cap);
    mp_pyro_config_free(cfg);
    free(prof);
}

TestSuite(requests, .init = setup, .fini = teardown);

static bool matches(const char *re, const char *s)
{
    regex_t r;
    cr_assert_eq(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static void expect_header(int i, const char *name, const char *value)
{
    char *v = cap_header(&cap, i, name);
    if (!value) {
        cr_expect_null(v, "header %s should be absent, is '%s'", name, v ? v : "");
    } else {
        cr_expect(v && strcmp(v, value) == 0, "header %s = '%s', expected '%s'", name,
                  v ? v : "(none)", value);
    }
    free(v);
}

/* The uploaded profile is the report without its `__delta__` sample
 * labels, interval and live samples of a stack merged into one: the same
 * totals of every type in one sample per stack; stamped at a whole
 * millisecond in the last second (the spread at the default interval) of
 * the window [from_ns, until_ns), or, a window shorter than that, in the
 * second after its start (README, "Time stamps"). */
static void expect_gz_is_profile(const uint8_t *gz, size_t n, int64_t from_ns, int64_t until_ns)
{
    cr_assert(n > 2 && gz[0] == 0x1f && gz[1] == 0x8b, "gzip magic");
    tbuf out = {0};
    cr_assert(t_gunzip(gz, n, &out));
    tp_profile sent, want;
    cr_assert(tp_decode(out.p, out.len, &sent));
    cr_assert(tp_decode(prof, prof_len, &want));
    cr_expect_eq(sent.nsamples, 2, "one sample per stack");
    for (size_t i = 0; i < sent.nsamples; i++)
        cr_expect_eq(sent.samples[i].nlabels, 0, "no sample label");
    cr_assert_eq(sent.nsample_types, want.nsample_types);
    for (size_t t = 0; t < want.nsample_types; t++)
        cr_expect_eq(tp_total_at(&sent, (int)t), tp_total_at(&want, (int)t), "type %zu", t);
    int64_t lo = (from_ns + 999999) / 1000000, hi = (until_ns + 999999) / 1000000 - 1;
    cr_expect_eq(sent.time_nanos % 1000000, 0, "a whole millisecond");
    int64_t t = sent.time_nanos / 1000000;
    if (hi - lo + 1 >= 1000) /* a full window: in its last second */
        cr_expect(t >= lo && t <= hi && t > hi - 1000, "stamped %lld ms, window %lld..%lld ms",
                  (long long)t, (long long)lo, (long long)hi);
    else /* shorter than the spread: within a second after it */
        cr_expect(t >= lo && t < lo + 1000, "stamped %lld ms, window %lld..%lld ms", (long long)t,
                  (long long)lo, (long long)hi);
    tp_free(&sent);
    tp_free(&want);
    tbuf_free(&out);
}

Test(requests, ingest_exact)
{
    mp_pyro_config_set_basic_auth(cfg, "123", "tok");
    mp_pyro_config_set_tenant(cfg, "team-a");
    mp_pyro_config_add_header(cfg, "X-Extra", "yes");
    mp_pyro_status s = mp_pyro_upload(cfg, prof, prof_len, 1700000000000000000, 1700000010000000000,
                                      NULL, err, sizeof err);
    cr_assert_eq(s, MP_PYRO_OK, "%s", err);
    cr_assert_eq(cap_count(&cap), 1);
    char *line = cap_request_line(&cap, 0);
    cr_expect_str_eq(line, "POST /ingest?name=svc%7Benv%3Dprod%2Cteam%3Dcore%7D&from=1700000000000"
                           "&until=1700000010000&spyName=mimprof HTTP/1.1");
    cr_expect_null(strstr(line, "format="), "no format parameter with multipart");
    free(line);
    expect_header(0, "Authorization", "Basic MTIzOnRvaw==");
    expect_header(0, "X-Scope-OrgID", "team-a");
    expect_header(0, "X-Extra", "yes");
    expect_header(0, "User-Agent", "mimprof-pyroscope/" MESON_VERSION);
    expect_header(0, "Expect", NULL);
    expect_header(0, "Connect-Protocol-Version", NULL);
    char *ct = cap_header(&cap, 0, "Content-Type");
    cr_assert(ct && matches("^multipart/form-data; boundary=mimprof[0-9a-f]{33}$", ct), "%s", ct);
    const char *boundary = strstr(ct, "boundary=") + 9;
    char head[512];
    int hl = snprintf(
        head, sizeof head,
        "--%s\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n",
        boundary);
    char tail[128];
    int tl = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    const cap_request *r = &cap.reqs[0];
    cr_assert(r->body_len > (size_t)(hl + tl));
    cr_expect(memcmp(r->body, head, (size_t)hl) == 0, "multipart part header");
    cr_expect(memcmp(r->body + r->body_len - tl, tail, (size_t)tl) == 0, "multipart close");
    expect_gz_is_profile(r->body + hl, r->body_len - (size_t)hl - (size_t)tl, 1700000000000000000,
                         1700000010000000000);
    free(ct);
}

Test(requests, ingest_path_prefix_and_url_credentials)
{
    char url[128];
    snprintf(url, sizeof url, "http://stack%%3A1:p%%40ss@127.0.0.1:%d/pyroscope/", cap.port);
    cr_assert_eq(mp_pyro_config_set_server(cfg, url), MP_PYRO_OK, "%s", mp_pyro_config_error(cfg));
    cr_assert_eq(mp_pyro_upload(cfg, prof, prof_len, 0, 1000000, "jemalloc", err, sizeof err),
                 MP_PYRO_OK, "%s", err);
    char *line = cap_request_line(&cap, 0);
    cr_expect(strncmp(line, "POST /pyroscope/ingest?name=", 28) == 0, "%s", line);
    cr_expect(strstr(line, "&from=0&until=1&spyName=jemalloc HTTP/1.1"), "%s", line);
    free(line);
    /* "stack:1" / "p@ss", percent-decoded from the URL */
    expect_header(0, "Authorization", "Basic c3RhY2s6MTpwQHNz");
}

static void decode_push(const cap_request *r, char labels[16][2][64], int *nlabels, int *nsamples,
                        tbuf *raw, char *id)
{
    pbr top = {r->body, r->body + r->body_len, false};
    pbf f;
    int nseries = 0;
    *nlabels = *nsamples = 0;
    while (pb_next(&top, &f)) {
        cr_assert_eq(f.field, 1, "PushRequest holds only series (1)");
        nseries++;
        pbr s = pb_sub(&f);
        pbf g;
        while (pb_next(&s, &g)) {
            pbr m = pb_sub(&g);
            pbf h;
            if (g.field == 1) {
                cr_assert_lt(*nlabels, 16);
                while (pb_next(&m, &h))
                    snprintf(labels[*nlabels][h.field == 1 ? 0 : 1], 64, "%.*s", (int)h.len,
                             h.data);
                (*nlabels)++;
            } else if (g.field == 2) {
                (*nsamples)++;
                while (pb_next(&m, &h)) {
                    if (h.field == 1)
                        tbuf_put(raw, h.data, h.len);
                    else if (h.field == 2)
                        snprintf(id, 64, "%.*s", (int)h.len, h.data);
                }
            } else {
                cr_assert(false, "unexpected RawProfileSeries field %u", g.field);
            }
        }
        cr_assert(!s.bad);
    }
    cr_assert(!top.bad);
    cr_assert_eq(nseries, 1);
}

static const char *label(char labels[16][2][64], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(labels[i][0], name) == 0)
            return labels[i][1];
    return NULL;
}

Test(requests, push_exact)
{
    mp_pyro_config_set_protocol(cfg, MP_PYRO_PROTOCOL_PUSH);
    mp_pyro_config_set_bearer_token(cfg, "tkn");
    mp_pyro_config_set_tenant(cfg, "team-b");
    cr_assert_eq(mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err), MP_PYRO_OK, "%s",
                 err);
    char *line = cap_request_line(&cap, 0);
    cr_expect_str_eq(line, "POST /push.v1.PusherService/Push HTTP/1.1");
    free(line);
    expect_header(0, "Content-Type", "application/proto");
    expect_header(0, "Connect-Protocol-Version", "1");
    expect_header(0, "Authorization", "Bearer tkn");
    expect_header(0, "X-Scope-OrgID", "team-b");
    expect_header(0, "Content-Encoding", NULL);
    char labels[16][2][64], id[64] = "";
    int nl, ns;
    tbuf raw = {0};
    decode_push(&cap.reqs[0], labels, &nl, &ns, &raw, id);
    cr_expect_eq(nl, 6);
    cr_expect_str_eq(label(labels, nl, "__name__"), "memory");
    cr_expect_str_eq(label(labels, nl, "__delta__"), "false");
    cr_expect_str_eq(label(labels, nl, "service_name"), "svc");
    cr_expect_str_eq(label(labels, nl, "pyroscope_spy"), "mimprof");
    cr_expect_str_eq(label(labels, nl, "env"), "prod");
    cr_expect_str_eq(label(labels, nl, "team"), "core");
    cr_expect_eq(ns, 1);
    cr_expect(matches("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", id),
              "ID %s", id);
    expect_gz_is_profile(raw.p, raw.len, 1, 2);
    tbuf_free(&raw);
}

Test(requests, redirect_not_followed_with_credentials)
{
    cap_server other;
    cr_assert(cap_start(&other, 200, NULL, ""));
    cap_stop(&cap);
    char loc[160];
    snprintf(loc, sizeof loc, "Location: %s/ingest\r\n", other.url);
    cr_assert(cap_start(&cap, 307, loc, ""));
    mp_pyro_config_set_server(cfg, cap.url);
    mp_pyro_config_set_basic_auth(cfg, "user", "secret");
    mp_pyro_status s = mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err);
    cr_expect_eq(s, MP_PYRO_E_HTTP_REJECTED);
    cr_expect(strstr(err, "redirect") && strstr(err, other.url), "%s", err);
    cr_expect_eq(cap_count(&cap), 1);
    cr_expect_eq(cap_count(&other), 0, "the redirect target got nothing");
    cap_stop(&other);
}

static mp_pyro_status upload_against(int status, const char *body)
{
    cap_stop(&cap);
    cr_assert(cap_start(&cap, status, NULL, body));
    mp_pyro_config_set_server(cfg, cap.url);
    return mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err);
}

Test(requests, status_classes_and_server_message)
{
    cr_expect_eq(
        upload_against(422, "{\"code\":\"unknown\",\"message\":\"failed to parse pprof: boom\"}"),
        MP_PYRO_E_HTTP_REJECTED);
    cr_expect(strstr(err, "HTTP 422") && strstr(err, "failed to parse pprof: boom"), "%s", err);
    cr_expect_eq(
        upload_against(400, "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"name\\\"\"}"),
        MP_PYRO_E_HTTP_REJECTED);
    cr_expect(strstr(err, "bad \"name\""), "%s", err);
    cr_expect_eq(upload_against(429, "{\"code\":\"resource_exhausted\",\"message\":\"slow down\"}"),
                 MP_PYRO_E_HTTP_RATE_LIMITED);
    cr_expect_eq(upload_against(503, "upstream down"), MP_PYRO_E_HTTP_SERVER);
    cr_expect(strstr(err, "upstream down"), "%s", err);
    cr_expect_eq(upload_against(204, ""), MP_PYRO_OK);
}

Test(requests, agent_windows_contiguous_and_aligned)
{
    fixed_backend *fb;
    mp_pyro_backend *b = fixed_backend_new(&fb);
    mp_pyro_config_set_upload_interval_ms(cfg, 100);
    mp_pyro_agent *a;
    /* start and stop are bracketed by clock reads: the first window starts
     * inside the start call, the last ends inside the stop call (which
     * also uploads), however long either takes on a loaded machine */
    int64_t t0 = now_ms();
    cr_assert_eq(mp_pyro_agent_start(cfg, b, &a), MP_PYRO_OK);
    int64_t t0_end = now_ms();
    sleep_ms(520);
    int64_t t1_begin = now_ms();
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    int64_t t1 = now_ms();
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    int n = cap_count(&cap);
    cr_expect_geq(n, 5);
    cr_expect_eq((uint64_t)n, st.uploaded);
    int64_t prev_until = -1;
    for (int i = 0; i < n; i++) {
        char *line = cap_request_line(&cap, i);
        long long from, until;
        const char *q = strstr(line, "&from=");
        cr_assert(q && sscanf(q, "&from=%lld&until=%lld", &from, &until) == 2, "%s", line);
        if (i == 0)
            cr_expect(from >= t0 - 1 && from <= t0_end, "first window starts at the agent's start");
        else
            cr_expect_eq(from, prev_until, "windows are contiguous");
        if (i < n - 1)
            cr_expect_eq(until % 100, 0, "boundary %lld is a multiple of the interval", until);
        else
            cr_expect(until <= t1 && until >= t1_begin - 1, "the last window ends at stop");
        prev_until = until;
        free(line);
    }
    mp_pyro_agent_free(a);
    mp_pyro_backend_free(b);
}
