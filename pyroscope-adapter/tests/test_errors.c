/* SPDX-License-Identifier: MIT */
/* Clear, typed errors: unreachable hosts, bad URLs, TLS failures. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#ifndef TS_CERT
#define TS_CERT ""
#endif

static mp_pyro_config *cfg;
static uint8_t *prof;
static size_t prof_len;
static char err[1024];

static void setup(void)
{
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    mp_pyro_config_set_app_name(cfg, "svc");
    mp_pyro_config_set_timeouts_ms(cfg, 2000, 4000);
    tp_heap_values v;
    fixed_values(0, &v);
    prof = tp_build_heap(&v, 1, 1, true, &prof_len);
}

static void teardown(void)
{
    mp_pyro_config_free(cfg);
    free(prof);
}

TestSuite(errors, .init = setup, .fini = teardown, .timeout = 60);

/* A port on 127.0.0.1 nobody listens on: bound and never listening, so
 * connections are refused, and kept bound for the rest of the test process
 * (each test is one) so that no other process can take it meanwhile. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    return ntohs(a.sin_port);
}

Test(errors, connection_refused)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    mp_pyro_config_set_server(cfg, url);
    cr_expect_eq(mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err),
                 MP_PYRO_E_CONNECT);
    cr_expect(strstr(err, "connect") || strstr(err, "Connect"), "%s", err);
    cr_expect(strstr(err, url), "the message names the endpoint: %s", err);
}

Test(errors, unresolvable_host)
{
    mp_pyro_config_set_server(cfg, "http://no-such-host.invalid:4040");
    mp_pyro_status s = mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err);
    cr_expect(s == MP_PYRO_E_CONNECT || s == MP_PYRO_E_TIMEOUT, "%s: %s", mp_pyro_strerror(s), err);
    cr_expect(strstr(err, "resolve") || strstr(err, "Timeout"), "%s", err);
}

Test(errors, bad_url_is_a_config_error_at_start)
{
    cr_expect_eq(mp_pyro_config_set_server(cfg, "htp://x"), MP_PYRO_E_INVALID_URL);
    cr_expect(strstr(mp_pyro_config_error(cfg), "http or https"), "%s", mp_pyro_config_error(cfg));
    fixed_backend *fb;
    mp_pyro_backend *b = fixed_backend_new(&fb);
    mp_pyro_agent *a = NULL;
    /* the server was never set: typed error, nothing started */
    cr_expect_eq(mp_pyro_agent_start(cfg, b, &a), MP_PYRO_E_NOT_CONFIGURED);
    cr_expect_null(a);
    cr_expect(!fb->started);
    cr_expect_eq(mp_pyro_config_add_tag(cfg, "region", "eu,west"), MP_PYRO_E_INVALID_LABEL);
    mp_pyro_backend_free(b);
}

Test(errors, tls_untrusted_certificate)
{
    if (!ts_have_standin() || !TS_CERT[0])
        cr_skip_test("stand-in not available");
    char key[512];
    snprintf(key, sizeof key, "%s", TS_CERT);
    char *slash = strrchr(key, '/');
    snprintf(slash + 1, sizeof key - (size_t)(slash + 1 - key), "key.pem");
    const char *args[] = {"--tls-cert", TS_CERT, "--tls-key", key, NULL};
    ts_server s;
    cr_assert(ts_start(&s, args));
    mp_pyro_config_set_server(cfg, s.url);
    /* the system CAs do not know the self-signed test certificate */
    mp_pyro_config_set_ca_path(cfg, "/etc/ssl/certs/ca-certificates.crt");
    cr_expect_eq(mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err), MP_PYRO_E_TLS);
    cr_expect(strstr(err, "certificate") || strstr(err, "SSL"), "%s", err);
    /* a CA file that does not exist */
    mp_pyro_config_set_ca_path(cfg, "/nonexistent/ca.pem");
    cr_expect_eq(mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err), MP_PYRO_E_TLS,
                 "%s", err);
    /* trusting the test certificate works */
    mp_pyro_config_set_ca_path(cfg, TS_CERT);
    int64_t t = now_ms() * 1000000;
    free(prof);
    tp_heap_values v;
    fixed_values(0, &v);
    prof = tp_build_heap(&v, t, 1000000, true, &prof_len);
    cr_expect_eq(mp_pyro_upload(cfg, prof, prof_len, t, t + 1000000, NULL, err, sizeof err),
                 MP_PYRO_OK, "%s", err);
    ts_stop(&s);
}

Test(errors, tls_to_a_plain_http_server)
{
    if (!ts_have_standin())
        cr_skip_test("stand-in not available");
    ts_server s;
    cr_assert(ts_start(&s, NULL));
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", s.port);
    mp_pyro_config_set_server(cfg, url);
    cr_expect_eq(mp_pyro_upload(cfg, prof, prof_len, 1, 2, NULL, err, sizeof err), MP_PYRO_E_TLS,
                 "%s", err);
    ts_stop(&s);
}

Test(errors, agent_reports_unreachable_in_stats)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", closed_port());
    mp_pyro_config_set_server(cfg, url);
    mp_pyro_config_set_upload_interval_ms(cfg, 50);
    mp_pyro_config_set_flush_deadline_ms(cfg, 100);
    mp_pyro_retry_policy p = {
        .max_attempts = 2, .initial_backoff_ms = 10, .max_backoff_ms = 10, .budget_ms = 1000};
    mp_pyro_config_set_retry(cfg, &p);
    fixed_backend *fb;
    mp_pyro_backend *b = fixed_backend_new(&fb);
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(cfg, b, &a), MP_PYRO_OK);
    sleep_ms(300);
    mp_pyro_agent_stop(a);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    cr_expect_gt(st.fail_connect, 0);
    cr_expect_eq(st.uploaded, 0);
    cr_expect_eq(st.reports_queued,
                 st.dropped_retry_exhausted + st.dropped_stop_deadline + st.dropped_queue_full);
    char msg[512];
    cr_expect_eq(mp_pyro_agent_last_error(a, msg, sizeof msg), MP_PYRO_E_CONNECT);
    cr_expect(strstr(msg, url), "%s", msg);
    mp_pyro_agent_free(a);
    mp_pyro_backend_free(b);
}
