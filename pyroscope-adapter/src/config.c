/* SPDX-License-Identifier: MIT */
/* mp_pyro_config: defaults, setters (each validates its value) and the
 * whole-config check run at agent start. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "labels.h"
#include "url.h"

mp_pyro_status mp_pyro_config_fail(mp_pyro_config *cfg, mp_pyro_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg->error, sizeof cfg->error, fmt, ap);
    va_end(ap);
    return s;
}

static mp_pyro_status ok(mp_pyro_config *cfg)
{
    cfg->error[0] = '\0';
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_config_new(mp_pyro_config **out)
{
    if (!out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_config *c = calloc(1, sizeof *c);
    if (!c)
        return MP_PYRO_E_NOMEM;
    c->protocol = MP_PYRO_PROTOCOL_INGEST;
    c->interval_ms = 10000;
    c->connect_timeout_ms = 5000;
    c->request_timeout_ms = 10000;
    c->queue_capacity = 16;
    c->flush_deadline_ms = 5000;
    c->retry = (mp_pyro_retry_policy){.max_attempts = 8,
                                      .initial_backoff_ms = 1000,
                                      .max_backoff_ms = 30000,
                                      .budget_ms = 120000};
    c->limits = (mp_pyro_server_limits){
        .max_samples = 16000, .max_profile_bytes = 4u << 20, .burst_bytes = 2u << 20};
    c->log_level = MP_PYRO_LOG_WARN;
    *out = c;
    return MP_PYRO_OK;
}

static void clear_basic(mp_pyro_config *c)
{
    free(c->basic_user);
    mp_pyro_free_secret(c->basic_password);
    c->basic_user = c->basic_password = NULL;
    c->basic_explicit = false;
}

void mp_pyro_config_free(mp_pyro_config *c)
{
    if (!c)
        return;
    free(c->server);
    mp_pyro_series_clear(&c->series);
    clear_basic(c);
    mp_pyro_free_secret(c->bearer);
    free(c->tenant);
    for (size_t i = 0; i < c->nheaders; i++) {
        free(c->headers[i].name);
        mp_pyro_free_secret(c->headers[i].value);
    }
    free(c->ca_path);
    free(c->spool_dir);
    free(c);
}

mp_pyro_status mp_pyro_config_copy(const mp_pyro_config *src, mp_pyro_config **out)
{
    if (!src || !out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_config *c = malloc(sizeof *c);
    if (!c)
        return MP_PYRO_E_NOMEM;
    *c = *src;
    c->server = c->basic_user = c->basic_password = c->bearer = c->tenant = NULL;
    c->ca_path = c->spool_dir = NULL;
    memset(&c->series, 0, sizeof c->series);
    c->nheaders = 0;
    bool bad = mp_pyro_series_copy(&src->series, &c->series) != MP_PYRO_OK;
#define DUP(f)                                                                                     \
    do {                                                                                           \
        if (src->f && !(c->f = strdup(src->f)))                                                    \
            bad = true;                                                                            \
    } while (0)
    DUP(server);
    DUP(basic_user);
    DUP(basic_password);
    DUP(bearer);
    DUP(tenant);
    DUP(ca_path);
    DUP(spool_dir);
#undef DUP
    for (size_t i = 0; i < src->nheaders && !bad; i++) {
        c->headers[i].name = strdup(src->headers[i].name);
        c->headers[i].value = strdup(src->headers[i].value);
        c->nheaders = i + 1;
        bad = !c->headers[i].name || !c->headers[i].value;
    }
    if (bad) {
        mp_pyro_config_free(c);
        return MP_PYRO_E_NOMEM;
    }
    *out = c;
    return MP_PYRO_OK;
}

const char *mp_pyro_config_error(const mp_pyro_config *cfg)
{
    return cfg ? cfg->error : "no configuration";
}

mp_pyro_status mp_pyro_config_set_server(mp_pyro_config *cfg, const char *url)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    char *base, *user, *password;
    mp_pyro_status st =
        mp_pyro_url_parse(url, &base, &user, &password, cfg->error, sizeof cfg->error);
    if (st != MP_PYRO_OK)
        return st;
    free(cfg->server);
    cfg->server = base;
    if (user && !cfg->basic_explicit) {
        clear_basic(cfg);
        cfg->basic_user = user;
        cfg->basic_password = password ? password : strdup("");
        if (!cfg->basic_password)
            return mp_pyro_config_fail(cfg, MP_PYRO_E_NOMEM, "out of memory");
    } else {
        free(user);
        mp_pyro_free_secret(password);
    }
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_app_name(mp_pyro_config *cfg, const char *name)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = mp_pyro_check_app_name(name, cfg->error, sizeof cfg->error);
    if (st != MP_PYRO_OK)
        return st;
    char *d = strdup(name);
    if (!d)
        return MP_PYRO_E_NOMEM;
    free(cfg->series.app);
    cfg->series.app = d;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_add_tag(mp_pyro_config *cfg, const char *name, const char *value)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st =
        mp_pyro_series_add_tag(&cfg->series, name, value, cfg->error, sizeof cfg->error);
    return st == MP_PYRO_OK ? ok(cfg) : st;
}

mp_pyro_status mp_pyro_config_add_tags(mp_pyro_config *cfg, const char *list)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = mp_pyro_series_add_tags(&cfg->series, list, cfg->error, sizeof cfg->error);
    return st == MP_PYRO_OK ? ok(cfg) : st;
}

mp_pyro_status mp_pyro_config_set_basic_auth(mp_pyro_config *cfg, const char *user,
                                             const char *password)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    clear_basic(cfg);
    if (!user)
        return ok(cfg);
    if (strchr(user, ':'))
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                   "Basic auth user may not contain ':'");
    cfg->basic_user = strdup(user);
    cfg->basic_password = strdup(password ? password : "");
    if (!cfg->basic_user || !cfg->basic_password) {
        clear_basic(cfg);
        return MP_PYRO_E_NOMEM;
    }
    cfg->basic_explicit = true;
    return ok(cfg);
}

static mp_pyro_status set_str(mp_pyro_config *cfg, char **field, const char *v, bool secret)
{
    char *d = NULL;
    if (v && !(d = strdup(v)))
        return MP_PYRO_E_NOMEM;
    if (secret)
        mp_pyro_free_secret(*field);
    else
        free(*field);
    *field = d;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_bearer_token(mp_pyro_config *cfg, const char *token)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (token) {
        for (const unsigned char *p = (const unsigned char *)token; *p; p++)
            if (*p < 0x21 || *p > 0x7E)
                return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                           "bearer token contains a blank or control character");
        if (!*token)
            return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG, "bearer token is empty");
    }
    return set_str(cfg, &cfg->bearer, token, true);
}

mp_pyro_status mp_pyro_config_set_tenant(mp_pyro_config *cfg, const char *tenant)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (tenant) {
        mp_pyro_status st = mp_pyro_check_tenant(tenant, cfg->error, sizeof cfg->error);
        if (st != MP_PYRO_OK)
            return st;
    }
    return set_str(cfg, &cfg->tenant, tenant, false);
}

mp_pyro_status mp_pyro_config_add_header(mp_pyro_config *cfg, const char *name, const char *value)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = mp_pyro_check_header(name, value, cfg->error, sizeof cfg->error);
    if (st != MP_PYRO_OK)
        return st;
    if (cfg->nheaders >= MP_PYRO_MAX_HEADERS)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG, "more than %d extra headers",
                                   MP_PYRO_MAX_HEADERS);
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return MP_PYRO_E_NOMEM;
    }
    cfg->headers[cfg->nheaders].name = n;
    cfg->headers[cfg->nheaders].value = v;
    cfg->nheaders++;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_protocol(mp_pyro_config *cfg, mp_pyro_protocol protocol)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (protocol != MP_PYRO_PROTOCOL_INGEST && protocol != MP_PYRO_PROTOCOL_PUSH)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG, "unknown protocol %d",
                                   (int)protocol);
    cfg->protocol = protocol;
    return ok(cfg);
}

static mp_pyro_status range(mp_pyro_config *cfg, const char *what, uint64_t v, uint64_t lo,
                            uint64_t hi)
{
    if (v < lo || v > hi)
        return mp_pyro_config_fail(
            cfg, MP_PYRO_E_INVALID_CONFIG, "%s is %llu; it must be within %llu..%llu", what,
            (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_config_set_upload_interval_ms(mp_pyro_config *cfg, uint32_t ms)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = range(cfg, "upload interval (ms)", ms, 10, MP_PYRO_MAX_INTERVAL_MS);
    if (st != MP_PYRO_OK)
        mp_pyro_fmt(cfg->error + strlen(cfg->error), sizeof cfg->error - strlen(cfg->error),
                    " (Pyroscope refuses profiles stamped more than 1 h ago; half of it is "
                    "left for retries and the spool)");
    else
        cfg->interval_ms = ms;
    return st == MP_PYRO_OK ? ok(cfg) : st;
}

mp_pyro_status mp_pyro_config_set_timeouts_ms(mp_pyro_config *cfg, uint32_t connect_ms,
                                              uint32_t request_ms)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = range(cfg, "connect timeout (ms)", connect_ms, 1, 600000);
    if (st == MP_PYRO_OK)
        st = range(cfg, "request timeout (ms)", request_ms, 1, 600000);
    if (st != MP_PYRO_OK)
        return st;
    cfg->connect_timeout_ms = connect_ms;
    cfg->request_timeout_ms = request_ms;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_ca_path(mp_pyro_config *cfg, const char *path)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    return set_str(cfg, &cfg->ca_path, path, false);
}

mp_pyro_status mp_pyro_config_set_queue_capacity(mp_pyro_config *cfg, uint32_t profiles)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = range(cfg, "queue capacity", profiles, 1, 4096);
    if (st == MP_PYRO_OK)
        cfg->queue_capacity = profiles;
    return st == MP_PYRO_OK ? ok(cfg) : st;
}

mp_pyro_status mp_pyro_config_set_retry(mp_pyro_config *cfg, const mp_pyro_retry_policy *p)
{
    if (!cfg || !p)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = range(cfg, "retry max_attempts", p->max_attempts, 1, 1000);
    if (st == MP_PYRO_OK)
        st = range(cfg, "retry initial_backoff_ms", p->initial_backoff_ms, 1, 3600000);
    if (st == MP_PYRO_OK)
        st = range(cfg, "retry max_backoff_ms", p->max_backoff_ms, p->initial_backoff_ms, 3600000);
    if (st == MP_PYRO_OK)
        st = range(cfg, "retry budget_ms", p->budget_ms, 0, 86400000);
    if (st != MP_PYRO_OK)
        return st;
    cfg->retry = *p;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_flush_deadline_ms(mp_pyro_config *cfg, uint32_t ms)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = range(cfg, "flush deadline (ms)", ms, 0, 600000);
    if (st == MP_PYRO_OK)
        cfg->flush_deadline_ms = ms;
    return st == MP_PYRO_OK ? ok(cfg) : st;
}

mp_pyro_status mp_pyro_config_set_spool(mp_pyro_config *cfg, const char *dir, uint64_t max_bytes,
                                        uint32_t max_age_s)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (dir && !*dir)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG, "spool directory is empty");
    if (max_age_s > MP_PYRO_MAX_SPOOL_AGE_S)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                   "spool max age is %u s; at most %u (Pyroscope refuses profiles "
                                   "stamped more than 1 h ago)",
                                   max_age_s, MP_PYRO_MAX_SPOOL_AGE_S);
    mp_pyro_status st = set_str(cfg, &cfg->spool_dir, dir, false);
    if (st != MP_PYRO_OK)
        return st;
    cfg->spool_max_bytes = max_bytes ? max_bytes : (uint64_t)64 << 20;
    cfg->spool_max_age_s = max_age_s ? max_age_s : MP_PYRO_MAX_SPOOL_AGE_S;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_server_limits(mp_pyro_config *cfg, const mp_pyro_server_limits *l)
{
    if (!cfg || !l)
        return MP_PYRO_E_INVALID_ARGUMENT;
    /* below these a profile's own tables would not fit in one request */
    if (l->max_profile_bytes && l->max_profile_bytes < 65536)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                   "server max profile size is %u bytes; at least 65536 or 0",
                                   l->max_profile_bytes);
    if (l->burst_bytes && l->burst_bytes < 65536)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                   "server rate-limit burst is %u bytes; at least 65536 or 0",
                                   l->burst_bytes);
    cfg->limits = *l;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_set_logger(mp_pyro_config *cfg, mp_pyro_log_level level,
                                         mp_pyro_log_fn fn, void *user)
{
    if (!cfg || level > MP_PYRO_LOG_DEBUG)
        return MP_PYRO_E_INVALID_ARGUMENT;
    cfg->log_level = level;
    cfg->log_fn = fn;
    cfg->log_user = fn ? user : NULL;
    return ok(cfg);
}

mp_pyro_status mp_pyro_config_validate(mp_pyro_config *cfg)
{
    if (!cfg)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (!cfg->server)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_NOT_CONFIGURED, "no server URL is set");
    if (!cfg->series.app)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_NOT_CONFIGURED, "no application name is set");
    mp_pyro_status st = mp_pyro_check_app_name(cfg->series.app, cfg->error, sizeof cfg->error);
    if (st != MP_PYRO_OK)
        return st;
    for (size_t i = 0; i < cfg->series.ntags; i++) {
        st = mp_pyro_check_label_name(cfg->series.tags[i].name, cfg->error, sizeof cfg->error);
        if (st == MP_PYRO_OK)
            st = mp_pyro_check_label_value(cfg->series.tags[i].name, cfg->series.tags[i].value,
                                           cfg->error, sizeof cfg->error);
        if (st != MP_PYRO_OK)
            return st;
    }
    if (cfg->bearer && cfg->basic_user)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG,
                                   "both Basic auth and a bearer token are set; choose one");
    if (cfg->retry.max_backoff_ms < cfg->retry.initial_backoff_ms)
        return mp_pyro_config_fail(cfg, MP_PYRO_E_INVALID_CONFIG, "retry max_backoff < initial");
    return ok(cfg);
}
