/* SPDX-License-Identifier: MIT */
/* Configuration through the public API: setters, validation, the
 * PYROSCOPE_* environment and its export for a child process. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/pyroscope.h>

static const char *const env_names[] = {"PYROSCOPE_SERVER_ADDRESS",
                                        "PYROSCOPE_APPLICATION_NAME",
                                        "PYROSCOPE_BASIC_AUTH_USER",
                                        "PYROSCOPE_BASIC_AUTH_PASSWORD",
                                        "PYROSCOPE_AUTH_TOKEN",
                                        "PYROSCOPE_TENANT_ID",
                                        "PYROSCOPE_TAGS",
                                        "PYROSCOPE_UPLOAD_INTERVAL",
                                        "MIMPROF_PYROSCOPE_PROTOCOL",
                                        "MIMPROF_PYROSCOPE_SPOOL_DIR",
                                        "MIMPROF_PYROSCOPE_CA_PATH",
                                        "MIMPROF_PYROSCOPE_FLUSH_DEADLINE",
                                        "MIMPROF_PYROSCOPE_LOG_LEVEL",
                                        "MIMPROF_PYROSCOPE_LIMITS",
                                        NULL};

static void clear_env(void)
{
    for (int i = 0; env_names[i]; i++)
        unsetenv(env_names[i]);
}

static mp_pyro_config *cfg;

static void setup(void)
{
    clear_env();
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
}

static void teardown(void)
{
    mp_pyro_config_free(cfg);
    clear_env();
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, required_fields)
{
    cr_expect_eq(mp_pyro_config_validate(cfg), MP_PYRO_E_NOT_CONFIGURED);
    cr_expect(strstr(mp_pyro_config_error(cfg), "server"));
    cr_assert_eq(mp_pyro_config_set_server(cfg, "http://localhost:4040/"), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_validate(cfg), MP_PYRO_E_NOT_CONFIGURED);
    cr_assert_eq(mp_pyro_config_set_app_name(cfg, "svc"), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_validate(cfg), MP_PYRO_OK);
}

Test(config, bad_urls)
{
    const char *bad[] = {
        "",  "localhost:4040", "ftp://h/", "http://", "http://h/#frag", "http://[::1", "not a url",
        NULL};
    for (int i = 0; bad[i]; i++) {
        cr_expect_eq(mp_pyro_config_set_server(cfg, bad[i]), MP_PYRO_E_INVALID_URL, "%s", bad[i]);
        cr_expect_neq(mp_pyro_config_error(cfg)[0], '\0');
    }
    cr_expect_eq(mp_pyro_config_set_server(cfg, "https://profiles.example.com/pyroscope"),
                 MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_set_server(cfg, "http://[::1]:4040"), MP_PYRO_OK);
}

Test(config, auth_conflict)
{
    mp_pyro_config_set_server(cfg, "http://h:4040");
    mp_pyro_config_set_app_name(cfg, "svc");
    cr_expect_eq(mp_pyro_config_set_basic_auth(cfg, "us:er", "x"), MP_PYRO_E_INVALID_CONFIG);
    cr_assert_eq(mp_pyro_config_set_basic_auth(cfg, "123", "tok"), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_bearer_token(cfg, "abc"), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_validate(cfg), MP_PYRO_E_INVALID_CONFIG);
    cr_expect(strstr(mp_pyro_config_error(cfg), "choose one"), "%s", mp_pyro_config_error(cfg));
    cr_expect_eq(mp_pyro_config_set_bearer_token(cfg, "has space"), MP_PYRO_E_INVALID_CONFIG);
}

Test(config, ranges)
{
    cr_expect_eq(mp_pyro_config_set_upload_interval_ms(cfg, 9), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_set_upload_interval_ms(cfg, 10), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_set_queue_capacity(cfg, 0), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_set_timeouts_ms(cfg, 0, 10), MP_PYRO_E_INVALID_CONFIG);
    mp_pyro_retry_policy p = {
        .max_attempts = 3, .initial_backoff_ms = 100, .max_backoff_ms = 50, .budget_ms = 1000};
    cr_expect_eq(mp_pyro_config_set_retry(cfg, &p), MP_PYRO_E_INVALID_CONFIG);
    p.max_backoff_ms = 100;
    cr_expect_eq(mp_pyro_config_set_retry(cfg, &p), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_set_protocol(cfg, (mp_pyro_protocol)7), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_add_header(cfg, "Authorization", "x"), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_set_tenant(cfg, "a b"), MP_PYRO_E_INVALID_CONFIG);
}

Test(config, from_env_all)
{
    setenv("PYROSCOPE_SERVER_ADDRESS", "https://stack:tok@profiles.example.com", 1);
    setenv("PYROSCOPE_APPLICATION_NAME", "checkout.api", 1);
    setenv("PYROSCOPE_TENANT_ID", "team-a", 1);
    setenv("PYROSCOPE_TAGS", "env=prod,region=eu-west-1", 1);
    setenv("PYROSCOPE_UPLOAD_INTERVAL", "15s", 1);
    setenv("MIMPROF_PYROSCOPE_PROTOCOL", "push", 1);
    setenv("MIMPROF_PYROSCOPE_FLUSH_DEADLINE", "1500ms", 1);
    setenv("MIMPROF_PYROSCOPE_LOG_LEVEL", "debug", 1);
    cr_assert_eq(mp_pyro_config_from_env(cfg), MP_PYRO_OK, "%s", mp_pyro_config_error(cfg));
    cr_assert_eq(mp_pyro_config_validate(cfg), MP_PYRO_OK);
    /* exported back: userinfo moved to the Basic auth variables */
    clear_env();
    cr_assert_eq(mp_pyro_config_export_env(cfg), MP_PYRO_OK);
    cr_expect_str_eq(getenv("PYROSCOPE_SERVER_ADDRESS"), "https://profiles.example.com");
    cr_expect_str_eq(getenv("PYROSCOPE_BASIC_AUTH_USER"), "stack");
    cr_expect_str_eq(getenv("PYROSCOPE_BASIC_AUTH_PASSWORD"), "tok");
    cr_expect_str_eq(getenv("PYROSCOPE_TAGS"), "env=prod,region=eu-west-1");
    cr_expect_str_eq(getenv("PYROSCOPE_UPLOAD_INTERVAL"), "15000ms");
    cr_expect_str_eq(getenv("MIMPROF_PYROSCOPE_PROTOCOL"), "push");
    cr_expect_str_eq(getenv("PYROSCOPE_TENANT_ID"), "team-a");
    cr_expect_str_eq(getenv("MIMPROF_PYROSCOPE_FLUSH_DEADLINE"), "1500ms");
    cr_expect_null(getenv("PYROSCOPE_AUTH_TOKEN"));
    /* and read again into a fresh config */
    mp_pyro_config *again;
    mp_pyro_config_new(&again);
    cr_expect_eq(mp_pyro_config_from_env(again), MP_PYRO_OK, "%s", mp_pyro_config_error(again));
    cr_expect_eq(mp_pyro_config_validate(again), MP_PYRO_OK);
    mp_pyro_config_free(again);
}

Test(config, from_env_errors_name_the_variable)
{
    setenv("PYROSCOPE_TAGS", "env=prod,__internal=1", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(mp_pyro_config_error(cfg), "PYROSCOPE_TAGS"), "%s", mp_pyro_config_error(cfg));
    clear_env();
    setenv("PYROSCOPE_UPLOAD_INTERVAL", "soon", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    clear_env();
    setenv("PYROSCOPE_BASIC_AUTH_PASSWORD", "x", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    clear_env();
    setenv("PYROSCOPE_SERVER_ADDRESS", "localhost:4040", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_URL);
    cr_expect(strstr(mp_pyro_config_error(cfg), "PYROSCOPE_SERVER_ADDRESS"));
    clear_env();
    setenv("MIMPROF_PYROSCOPE_PROTOCOL", "grpc", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    clear_env();
    setenv("MIMPROF_PYROSCOPE_LOG_LEVEL", "loud", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    clear_env();
    setenv("MIMPROF_PYROSCOPE_FLUSH_DEADLINE", "0", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_OK);
}

/* Pyroscope refuses a profile stamped (with its window's start) more than
 * 1 h ago: an interval near an hour would never be accepted. */
Test(config, interval_and_spool_age_bounded_by_the_ingestion_window)
{
    cr_expect_eq(mp_pyro_config_set_upload_interval_ms(cfg, 3540000), MP_PYRO_E_INVALID_CONFIG);
    cr_expect(strstr(mp_pyro_config_error(cfg), "1 h"), "%s", mp_pyro_config_error(cfg));
    cr_expect_eq(mp_pyro_config_set_upload_interval_ms(cfg, 1800001), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_set_upload_interval_ms(cfg, 1800000), MP_PYRO_OK);
    setenv("PYROSCOPE_UPLOAD_INTERVAL", "59m", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    cr_expect(strstr(mp_pyro_config_error(cfg), "PYROSCOPE_UPLOAD_INTERVAL"));
    clear_env();
    cr_expect_eq(mp_pyro_config_set_spool(cfg, "/tmp/x", 0, 3600), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_config_set_spool(cfg, "/tmp/x", 0, 3300), MP_PYRO_OK);
}

/* A tag 1.13 would refuse at every upload is refused here, before start. */
Test(config, leading_digit_label_refused_before_start)
{
    mp_pyro_config_set_server(cfg, "http://127.0.0.1:1");
    mp_pyro_config_set_app_name(cfg, "a");
    cr_expect_eq(mp_pyro_config_add_tag(cfg, "1az", "x"), MP_PYRO_E_INVALID_LABEL);
    setenv("PYROSCOPE_SERVER_ADDRESS", "http://127.0.0.1:1", 1);
    setenv("PYROSCOPE_APPLICATION_NAME", "a", 1);
    setenv("PYROSCOPE_TAGS", "env=prod,1az=x", 1);
    mp_pyro_agent *a = NULL;
    cr_expect_eq(mp_pyro_agent_start_from_env(NULL, &a), MP_PYRO_E_INVALID_LABEL);
    cr_expect_null(a);
    clear_env();
}

Test(config, server_limits)
{
    mp_pyro_server_limits l = {.max_samples = 1000, .max_profile_bytes = 1 << 20, .burst_bytes = 0};
    cr_expect_eq(mp_pyro_config_set_server_limits(cfg, &l), MP_PYRO_OK);
    l.burst_bytes = 100;
    cr_expect_eq(mp_pyro_config_set_server_limits(cfg, &l), MP_PYRO_E_INVALID_CONFIG);
    setenv("MIMPROF_PYROSCOPE_LIMITS", "samples=8000,burst=4194304", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_OK, "%s", mp_pyro_config_error(cfg));
    clear_env();
    mp_pyro_config_set_server(cfg, "http://127.0.0.1:1");
    mp_pyro_config_set_app_name(cfg, "a");
    cr_assert_eq(mp_pyro_config_export_env(cfg), MP_PYRO_OK);
    cr_expect_str_eq(getenv("MIMPROF_PYROSCOPE_LIMITS"),
                     "samples=8000,bytes=1048576,burst=4194304");
    clear_env();
    setenv("MIMPROF_PYROSCOPE_LIMITS", "samples=many", 1);
    cr_expect_eq(mp_pyro_config_from_env(cfg), MP_PYRO_E_INVALID_CONFIG);
    clear_env();
}

Test(config, start_from_env_not_configured)
{
    mp_pyro_agent *a = NULL;
    mp_pyro_backend *b = NULL;
    mp_pyro_jemalloc_options o;
    mp_pyro_jemalloc_options_init(&o);
    /* any backend handle will do: nothing is started */
    if (mp_pyro_backend_jemalloc_new(&o, &b) != MP_PYRO_OK)
        cr_skip_test("jemalloc backend not built");
    cr_expect_eq(mp_pyro_agent_start_from_env(b, &a), MP_PYRO_E_NOT_CONFIGURED);
    cr_expect_null(a);
    mp_pyro_backend_free(b);
}

Test(config, copy_and_strerror)
{
    mp_pyro_config_set_server(cfg, "http://u:p@h:1");
    mp_pyro_config_set_app_name(cfg, "a");
    mp_pyro_config_add_tags(cfg, "x=1");
    mp_pyro_config_add_header(cfg, "X-Extra", "1");
    mp_pyro_config *c2;
    cr_assert_eq(mp_pyro_config_copy(cfg, &c2), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_config_validate(c2), MP_PYRO_OK);
    mp_pyro_config_free(c2);
    for (int s = 0; s <= MP_PYRO_E_INTERNAL; s++)
        cr_expect_str_neq(mp_pyro_strerror((mp_pyro_status)s), "unknown status");
    cr_expect(mp_pyro_status_is_retryable(MP_PYRO_E_HTTP_RATE_LIMITED));
    cr_expect(!mp_pyro_status_is_retryable(MP_PYRO_E_HTTP_REJECTED));
    cr_expect_str_eq(mp_pyro_version(), MESON_VERSION);
}
