/* SPDX-License-Identifier: MIT */
/* PYROSCOPE_* environment variables: read (mp_pyro_config_from_env) and
 * written back for a child process (mp_pyro_config_export_env). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "labels.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* "10s", "500ms", "1m", "2h" or plain seconds -> ms; 0 on error. */
static uint64_t parse_duration_ms(const char *s)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return 0;
    while (isspace((unsigned char)*end))
        end++;
    double mult;
    if (!*end || strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return 0;
    double ms = v * mult;
    return ms >= 1 && ms < 1e12 ? (uint64_t)(ms + 0.5) : 0;
}

#define CHECK(var, call)                                                                           \
    do {                                                                                           \
        mp_pyro_status st_ = (call);                                                               \
        if (st_ != MP_PYRO_OK) {                                                                   \
            char why_[MP_PYRO_ERRLEN];                                                             \
            snprintf(why_, sizeof why_, "%s", cfg->error);                                         \
            return mp_pyro_config_fail(cfg, st_, "%s: %s", var,                                    \
                                       why_[0] ? why_ : mp_pyro_strerror(st_));                    \
        }                                                                                          \
    } while (0)

/* "samples=N,bytes=N,burst=N" (any subset, any order) over `l`; -1 on error. */
static int parse_limits(const char *s, mp_pyro_server_limits *l)
{
    while (*s) {
        uint32_t *field;
        size_t klen;
        if (strncmp(s, "samples=", klen = 8) == 0)
            field = &l->max_samples;
        else if (strncmp(s, "bytes=", klen = 6) == 0)
            field = &l->max_profile_bytes;
        else if (strncmp(s, "burst=", klen = 6) == 0)
            field = &l->burst_bytes;
        else
            return -1;
        s += klen;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || v > UINT32_MAX || (*end && *end != ','))
            return -1;
        *field = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    return 0;
}

mp_pyro_status mp_pyro_config_from_env(mp_pyro_config *cfg)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    const char *v;
    if ((v = env("PYROSCOPE_SERVER_ADDRESS")))
        CHECK("PYROSCOPE_SERVER_ADDRESS", mp_pyro_config_set_server(cfg, v));
    if ((v = env("PYROSCOPE_APPLICATION_NAME")))
        CHECK("PYROSCOPE_APPLICATION_NAME", mp_pyro_config_set_app_name(cfg, v));
    const char *user = env("PYROSCOPE_BASIC_AUTH_USER");
    const char *pass = env("PYROSCOPE_BASIC_AUTH_PASSWORD");
    if (user || pass) {
        if (!user)
            return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                       "PYROSCOPE_BASIC_AUTH_PASSWORD is set without "
                                       "PYROSCOPE_BASIC_AUTH_USER");
        CHECK("PYROSCOPE_BASIC_AUTH_USER", mp_pyro_config_set_basic_auth(cfg, user, pass));
    }
    if ((v = env("PYROSCOPE_AUTH_TOKEN")))
        CHECK("PYROSCOPE_AUTH_TOKEN", mp_pyro_config_set_bearer_token(cfg, v));
    if ((v = env("PYROSCOPE_TENANT_ID")))
        CHECK("PYROSCOPE_TENANT_ID", mp_pyro_config_set_tenant(cfg, v));
    if ((v = env("PYROSCOPE_TAGS")))
        CHECK("PYROSCOPE_TAGS", mp_pyro_config_add_tags(cfg, v));
    if ((v = env("PYROSCOPE_UPLOAD_INTERVAL"))) {
        uint64_t ms = parse_duration_ms(v);
        if (ms == 0 || ms > UINT32_MAX)
            return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                       "PYROSCOPE_UPLOAD_INTERVAL: '%.64s' is not a duration "
                                       "(10s, 500ms, 1m)",
                                       v);
        CHECK("PYROSCOPE_UPLOAD_INTERVAL",
              mp_pyro_config_set_upload_interval_ms(cfg, (uint32_t)ms));
    }
    if ((v = env("MIMPROF_PYROSCOPE_PROTOCOL"))) {
        if (strcmp(v, "ingest") == 0)
            cfg->protocol = MP_PYRO_PROTOCOL_INGEST;
        else if (strcmp(v, "push") == 0)
            cfg->protocol = MP_PYRO_PROTOCOL_PUSH;
        else
            return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                       "MIMPROF_PYROSCOPE_PROTOCOL: '%.64s' is neither 'ingest' "
                                       "nor 'push'",
                                       v);
    }
    if ((v = env("MIMPROF_PYROSCOPE_SPOOL_DIR")))
        CHECK("MIMPROF_PYROSCOPE_SPOOL_DIR", mp_pyro_config_set_spool(cfg, v, 0, 0));
    if ((v = env("MIMPROF_PYROSCOPE_CA_PATH")))
        CHECK("MIMPROF_PYROSCOPE_CA_PATH", mp_pyro_config_set_ca_path(cfg, v));
    if ((v = env("MIMPROF_PYROSCOPE_FLUSH_DEADLINE"))) {
        uint64_t ms = strcmp(v, "0") == 0 ? 0 : parse_duration_ms(v);
        if ((ms == 0 && strcmp(v, "0") != 0) || ms > UINT32_MAX)
            return mp_pyro_config_fail(
                cfg, MP_PYRO_E_INVALID_CONFIG,
                "MIMPROF_PYROSCOPE_FLUSH_DEADLINE: '%.64s' is not a duration", v);
        CHECK("MIMPROF_PYROSCOPE_FLUSH_DEADLINE",
              mp_pyro_config_set_flush_deadline_ms(cfg, (uint32_t)ms));
    }
    if ((v = env("MIMPROF_PYROSCOPE_LIMITS"))) {
        mp_pyro_server_limits l = cfg->limits;
        if (parse_limits(v, &l) != 0)
            return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                       "MIMPROF_PYROSCOPE_LIMITS: '%.64s' is not "
                                       "samples=N,bytes=N,burst=N",
                                       v);
        CHECK("MIMPROF_PYROSCOPE_LIMITS", mp_pyro_config_set_server_limits(cfg, &l));
    }
    if ((v = env("MIMPROF_PYROSCOPE_LOG_LEVEL"))) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        int level = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(v, names[i]) == 0)
                level = i;
        if (level < 0)
            return mp_pyro_config_fail(
                cfg, MP_PYRO_E_INVALID_CONFIG,
                "MIMPROF_PYROSCOPE_LOG_LEVEL: '%.64s' is not error, warn, info "
                "or debug",
                v);
        cfg->log_level = (mp_pyro_log_level)level;
    }
    cfg->error[0] = '\0';
    return MP_PYRO_OK;
}

static mp_pyro_status put(const char *name, const char *value)
{
    int rc = value ? setenv(name, value, 1) : unsetenv(name);
    return rc == 0 ? MP_PYRO_OK : MP_PYRO_E_NOMEM;
}

mp_pyro_status mp_pyro_config_export_env(const mp_pyro_config *cfg)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_buf tags = {0};
    for (size_t i = 0; i < cfg->series.ntags; i++)
        mp_pyro_buf_printf(&tags, "%s%s=%s", i ? "," : "", cfg->series.tags[i].name,
                           cfg->series.tags[i].value);
    const char *tag_str = cfg->series.ntags ? mp_pyro_buf_cstr(&tags) : NULL;
    if (cfg->series.ntags && !tag_str) {
        mp_pyro_buf_free(&tags);
        return MP_PYRO_E_NOMEM;
    }
    char interval[32];
    snprintf(interval, sizeof interval, "%ums", (unsigned)cfg->interval_ms);
    mp_pyro_status st = MP_PYRO_OK;
    /* The URL is exported without userinfo; credentials travel in the
     * dedicated variables. */
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_SERVER_ADDRESS", cfg->server);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_APPLICATION_NAME", cfg->series.app);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_BASIC_AUTH_USER", cfg->basic_user);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_BASIC_AUTH_PASSWORD", cfg->basic_user ? cfg->basic_password : NULL);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_AUTH_TOKEN", cfg->bearer);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_TENANT_ID", cfg->tenant);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_TAGS", tag_str);
    if (st == MP_PYRO_OK)
        st = put("PYROSCOPE_UPLOAD_INTERVAL", interval);
    if (st == MP_PYRO_OK)
        st = put("MIMPROF_PYROSCOPE_PROTOCOL",
                 cfg->protocol == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest");
    if (st == MP_PYRO_OK)
        st = put("MIMPROF_PYROSCOPE_SPOOL_DIR", cfg->spool_dir);
    if (st == MP_PYRO_OK)
        st = put("MIMPROF_PYROSCOPE_CA_PATH", cfg->ca_path);
    char deadline[32];
    snprintf(deadline, sizeof deadline, "%ums", (unsigned)cfg->flush_deadline_ms);
    if (st == MP_PYRO_OK)
        st = put("MIMPROF_PYROSCOPE_FLUSH_DEADLINE", cfg->flush_deadline_ms ? deadline : "0");
    char limits[96];
    snprintf(limits, sizeof limits, "samples=%u,bytes=%u,burst=%u", cfg->limits.max_samples,
             cfg->limits.max_profile_bytes, cfg->limits.burst_bytes);
    if (st == MP_PYRO_OK)
        st = put("MIMPROF_PYROSCOPE_LIMITS", limits);
    mp_pyro_buf_free(&tags);
    return st;
}
