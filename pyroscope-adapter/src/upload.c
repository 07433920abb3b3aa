/* SPDX-License-Identifier: MIT */
/* One profile, one request: the agent's unit of work, and the synchronous
 * mp_pyro_upload(). */
#define _GNU_SOURCE
#include "upload.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"

void mp_pyro_send_profile(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_series *series,
                          const char *spy, const uint8_t *gz, size_t gz_len, int64_t from_ns,
                          int64_t until_ns, mp_pyro_rng *rng, const _Atomic int64_t *abort_at,
                          mp_pyro_http_result *res, size_t *body_len)
{
    mp_pyro_request req;
    mp_pyro_status st =
        cfg->protocol == MP_PYRO_PROTOCOL_PUSH
            ? mp_pyro_push_request(cfg, series, spy, gz, gz_len, rng, &req)
            : mp_pyro_ingest_request(cfg, series, spy, gz, gz_len, from_ns, until_ns, rng, &req);
    *body_len = 0;
    if (st != MP_PYRO_OK) {
        memset(res, 0, sizeof *res);
        res->status = st;
        mp_pyro_fmt(res->message, sizeof res->message, "building the request: %s",
                    mp_pyro_strerror(st));
        return;
    }
    *body_len = req.body.len;
    mp_pyro_http_send(h, cfg, &req, abort_at, res);
    mp_pyro_request_free(&req);
}

/* The label bytes the server's rate limiter adds for the series: every
 * label the server gives it (distributor calculateRequestSize). */
static size_t label_bytes(const mp_pyro_config *cfg, const char *spy)
{
    size_t n = strlen("__name__memory__delta__falseservice_namepyroscope_spy") +
               strlen(cfg->series.app) + strlen(spy);
    for (size_t i = 0; i < cfg->series.ntags; i++)
        n += strlen(cfg->series.tags[i].name) + strlen(cfg->series.tags[i].value);
    return n;
}

typedef struct stamp_ctx {
    mp_pyro_stamper *st;
    pthread_mutex_t *mu;
    mp_pyro_stamp_req req;
} stamp_ctx;

static int64_t stamp_part(void *ctx, size_t part, int64_t peak_ns)
{
    stamp_ctx *c = ctx;
    c->req.at_ns = peak_ns;
    if (c->mu)
        pthread_mutex_lock(c->mu);
    int64_t ms = mp_pyro_stamp_ms(c->st, &c->req, part);
    if (c->mu)
        pthread_mutex_unlock(c->mu);
    return ms * 1000000;
}

mp_pyro_status mp_pyro_prepare(const mp_pyro_config *cfg, const char *spy, const uint8_t *pprof,
                               size_t len, int64_t from_ns, int64_t until_ns,
                               mp_pyro_stamper *stamper, pthread_mutex_t *stamper_mu,
                               mp_pyro_item **items, size_t *n, char *err, size_t errlen)
{
    *items = NULL;
    *n = 0;
    size_t max_bytes = cfg->limits.max_profile_bytes;
    if (cfg->limits.burst_bytes && (!max_bytes || cfg->limits.burst_bytes < max_bytes))
        max_bytes = cfg->limits.burst_bytes;
    if (max_bytes) {
        size_t lb = label_bytes(cfg, spy);
        max_bytes = max_bytes > lb ? max_bytes - lb : 1;
    }
    /* the pid at each report: a forked child stamps in its own slot */
    stamp_ctx sc = {stamper,
                    stamper_mu,
                    {.from_ns = from_ns,
                     .until_ns = until_ns,
                     .interval_ms = cfg->interval_ms,
                     .pid = getpid()}};
    const mp_pyro_fit_stamp fs = {stamp_part, &sc};
    mp_pyro_parts parts;
    mp_pyro_status st =
        mp_pyro_fit(pprof, len, cfg->limits.max_samples, max_bytes, &fs, &parts, err, errlen);
    if (st != MP_PYRO_OK)
        return st;
    mp_pyro_item *v = calloc(parts.n, sizeof *v);
    if (!v) {
        mp_pyro_parts_free(&parts);
        return MP_PYRO_E_NOMEM;
    }
    for (size_t i = 0; i < parts.n && st == MP_PYRO_OK; i++) {
        v[i].from_ns = from_ns;
        v[i].until_ns = until_ns;
        st = mp_pyro_gzip(parts.v[i].pprof, parts.v[i].len, &v[i].gz, &v[i].gz_len);
    }
    if (st != MP_PYRO_OK) {
        for (size_t i = 0; i < parts.n; i++)
            free(v[i].gz);
        free(v);
    } else {
        *items = v;
        *n = parts.n;
    }
    mp_pyro_parts_free(&parts);
    return st;
}

mp_pyro_status mp_pyro_upload(mp_pyro_config *cfg, const uint8_t *pprof, size_t len,
                              int64_t from_nanos, int64_t until_nanos, const char *spy_name,
                              char *err, size_t err_len)
{
    if (err && err_len)
        err[0] = '\0';
    if (!cfg || (!pprof && len))
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = mp_pyro_config_validate(cfg);
    if (st != MP_PYRO_OK) {
        mp_pyro_fmt(err, err_len, "%s", cfg->error);
        return st;
    }
    const char *spy = spy_name ? spy_name : "mimprof";
    mp_pyro_item *items;
    size_t n;
    char why[MP_PYRO_ERRLEN] = "";
    /* no stamper: the same window gets the same times again, so a
     * caller's retry of the whole upload replaces what got through */
    st = mp_pyro_prepare(cfg, spy, pprof, len, from_nanos, until_nanos, NULL, NULL, &items, &n, why,
                         sizeof why);
    if (st != MP_PYRO_OK) {
        mp_pyro_fmt(err, err_len, "%s", why[0] ? why : mp_pyro_strerror(st));
        return st;
    }
    mp_pyro_http *h = NULL;
    st = mp_pyro_http_new(&h);
    mp_pyro_rng rng;
    mp_pyro_rng_seed(&rng);
    /* the parts in order; the first failure ends the call (the header
     * says what a caller that retries then sends twice) */
    for (size_t i = 0; i < n && st == MP_PYRO_OK; i++) {
        mp_pyro_http_result res;
        size_t body_len;
        mp_pyro_send_profile(h, cfg, &cfg->series, spy, items[i].gz, items[i].gz_len, from_nanos,
                             until_nanos, &rng, NULL, &res, &body_len);
        st = res.status;
        if (st != MP_PYRO_OK)
            mp_pyro_fmt(err, err_len, "%s%s", n > 1 ? "part of a split report: " : "", res.message);
    }
    mp_pyro_http_free(h);
    for (size_t i = 0; i < n; i++)
        free(items[i].gz);
    free(items);
    return st;
}
