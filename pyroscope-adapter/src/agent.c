/* SPDX-License-Identifier: MIT */
/* The agent's life cycle and public functions (see agent_internal.h for its
 * threads and invariants). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "request.h"
#include "retype.h"

static void agent_destroy(mp_pyro_agent *a)
{
    mp_pyro_queue_destroy(&a->q);
    mp_pyro_spool_close(a->spool);
    mp_pyro_http_free(a->http);
    mp_pyro_config_free(a->cfg);
    pthread_cond_destroy(&a->rep_cv);
    pthread_cond_destroy(&a->up_cv);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->stop_mu);
    free(a);
}

mp_pyro_status mp_pyro_agent_start(const mp_pyro_config *cfg_in, mp_pyro_backend *backend,
                                   mp_pyro_agent **out)
{
    if (!cfg_in || !out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_agent *a = calloc(1, sizeof *a);
    if (!a)
        return MP_PYRO_E_NOMEM;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->stop_mu, NULL);
    pthread_cond_init(&a->rep_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->up_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&a->abort_at, 0);

    mp_pyro_status s = mp_pyro_config_copy(cfg_in, &a->cfg);
    if (s != MP_PYRO_OK) {
        a->cfg = NULL;
        agent_destroy(a);
        return s;
    }
    s = mp_pyro_config_validate(a->cfg);
    if (s != MP_PYRO_OK) {
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "not started: %s", a->cfg->error);
        agent_destroy(a);
        return s;
    }
    if ((s = mp_pyro_http_new(&a->http)) != MP_PYRO_OK ||
        (s = mp_pyro_queue_init(&a->q, a->cfg->queue_capacity)) != MP_PYRO_OK) {
        agent_destroy(a);
        return s;
    }
    if (a->cfg->spool_dir) {
        char err[MP_PYRO_ERRLEN];
        s = mp_pyro_spool_open(a->cfg->spool_dir, a->cfg->spool_max_bytes, a->cfg->spool_max_age_s,
                               a->cfg, &a->spool, err, sizeof err);
        if (s != MP_PYRO_OK) {
            mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "not started: %s", err);
            agent_destroy(a);
            return s;
        }
        uint64_t files, bytes, foreign;
        mp_pyro_spool_counts(a->spool, &files, &bytes, &foreign);
        if (foreign)
            mp_pyro_log(a->cfg, MP_PYRO_LOG_WARN,
                        "spool '%s': %llu profiles were spooled for another server, tenant or "
                        "credentials: kept, not sent (they expire %u s after their start)",
                        a->cfg->spool_dir, (unsigned long long)foreign, a->cfg->spool_max_age_s);
    }
    if (backend) {
        bool expected = false;
        if (!atomic_compare_exchange_strong(&backend->in_use, &expected, true)) {
            agent_destroy(a);
            return MP_PYRO_E_STATE;
        }
        a->backend = backend;
        mp_pyro_fmt(a->spy, sizeof a->spy, "%s", backend->ops->name(backend->state));
        backend->error[0] = '\0';
        s = backend->ops->start(backend->state);
        if (s != MP_PYRO_OK) {
            mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "backend %s did not start: %s%s%s", a->spy,
                        mp_pyro_strerror(s), backend->error[0] ? ": " : "", backend->error);
            atomic_store(&backend->in_use, false);
            agent_destroy(a);
            return s;
        }
    } else {
        /* sink mode: profiles arrive through mp_pyro_agent_submit() */
        mp_pyro_fmt(a->spy, sizeof a->spy, "mimprof");
        a->reporter_done = true;
    }
    mp_pyro_rng_seed(&a->rng);
    a->st.queue_capacity = a->cfg->queue_capacity;
    a->last_boundary_ns = mp_pyro_now_real_ns();
    if (pthread_create(&a->uploader, NULL, mp_pyro_uploader_main, a) != 0) {
        if (backend) {
            backend->ops->stop(backend->state);
            atomic_store(&backend->in_use, false);
        }
        agent_destroy(a);
        return MP_PYRO_E_NOMEM;
    }
    if (backend && pthread_create(&a->reporter, NULL, mp_pyro_reporter_main, a) != 0) {
        pthread_mutex_lock(&a->mu);
        a->stopping = a->reporter_done = true;
        pthread_cond_broadcast(&a->up_cv);
        pthread_mutex_unlock(&a->mu);
        pthread_join(a->uploader, NULL);
        backend->ops->stop(backend->state);
        atomic_store(&backend->in_use, false);
        agent_destroy(a);
        return MP_PYRO_E_NOMEM;
    }
    mp_pyro_log(a->cfg, MP_PYRO_LOG_INFO, "started: %s %s %u ms to %s (%s)", a->spy,
                backend ? "every" : "(submitted profiles),", a->cfg->interval_ms, a->cfg->server,
                a->cfg->protocol == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest");
    *out = a;
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_agent_start_from_env(mp_pyro_backend *backend, mp_pyro_agent **out)
{
    if (!out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    const char *srv = getenv("PYROSCOPE_SERVER_ADDRESS");
    const char *app = getenv("PYROSCOPE_APPLICATION_NAME");
    if (!srv || !*srv || !app || !*app)
        return MP_PYRO_E_NOT_CONFIGURED;
    mp_pyro_config *cfg;
    mp_pyro_status s = mp_pyro_config_new(&cfg);
    if (s != MP_PYRO_OK)
        return s;
    s = mp_pyro_config_from_env(cfg);
    if (s != MP_PYRO_OK)
        mp_pyro_log(cfg, MP_PYRO_LOG_ERROR, "not started: %s", cfg->error);
    else
        s = mp_pyro_agent_start(cfg, backend, out);
    mp_pyro_config_free(cfg);
    return s;
}

mp_pyro_status mp_pyro_agent_stop(mp_pyro_agent *a)
{
    if (!a)
        return MP_PYRO_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&a->stop_mu);
    if (a->stopped) {
        pthread_mutex_unlock(&a->stop_mu);
        return a->stop_status;
    }
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    a->flush_deadline_ns = mp_pyro_now_mono_ns() + (int64_t)a->cfg->flush_deadline_ms * 1000000;
    atomic_store(&a->abort_at, a->flush_deadline_ns);
    pthread_cond_broadcast(&a->rep_cv);
    pthread_cond_broadcast(&a->up_cv);
    pthread_mutex_unlock(&a->mu);
    mp_pyro_http_wakeup(a->http);
    if (a->backend)
        pthread_join(a->reporter, NULL);
    pthread_join(a->uploader, NULL);
    pthread_mutex_lock(&a->mu);
    a->stop_status = a->disposed_at_stop ? MP_PYRO_E_DEADLINE : MP_PYRO_OK;
    a->stopped = true;
    pthread_mutex_unlock(&a->mu);
    if (a->backend)
        atomic_store(&a->backend->in_use, false);
    mp_pyro_log(a->cfg, MP_PYRO_LOG_INFO,
                "stopped: %llu uploaded, %llu spooled, %llu left at the "
                "deadline",
                (unsigned long long)a->st.uploaded, (unsigned long long)a->st.spooled,
                (unsigned long long)a->disposed_at_stop);
    pthread_mutex_unlock(&a->stop_mu);
    return a->stop_status;
}

static mp_pyro_status submit(mp_pyro_agent *a, const uint8_t *pprof, size_t len, int64_t from_nanos,
                             int64_t until_nanos, bool renamed)
{
    if (!a || (!pprof && len) || until_nanos < from_nanos)
        return MP_PYRO_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&a->mu);
    bool closed = a->stopping;
    if (!closed) {
        a->st.reports++;
        if (len == 0)
            a->st.reports_empty++;
    }
    pthread_mutex_unlock(&a->mu);
    if (closed)
        return MP_PYRO_E_STATE;
    if (len == 0)
        return MP_PYRO_OK;
    return mp_pyro_agent_queue_report(a, pprof, len, from_nanos, until_nanos, renamed);
}

mp_pyro_status mp_pyro_agent_submit(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                    int64_t from_nanos, int64_t until_nanos)
{
    return submit(a, pprof, len, from_nanos, until_nanos, false);
}

mp_pyro_status mp_pyro_agent_submit_as(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                       int64_t from_nanos, int64_t until_nanos,
                                       const char *type_prefix)
{
    if (!a || !mp_pyro_retype_prefix_ok(type_prefix) || (!pprof && len) || until_nanos < from_nanos)
        return MP_PYRO_E_INVALID_ARGUMENT;
    if (len == 0)
        return mp_pyro_agent_submit(a, pprof, len, from_nanos, until_nanos);
    uint8_t *typed = NULL;
    size_t typed_len = 0;
    mp_pyro_status s = mp_pyro_retype(pprof, len, type_prefix, &typed, &typed_len);
    if (s == MP_PYRO_OK) {
        s = submit(a, typed, typed_len, from_nanos, until_nanos, true);
    } else { /* counted as mp_pyro_agent_submit counts a profile it cannot read */
        pthread_mutex_lock(&a->mu);
        bool closed = a->stopping;
        if (!closed) {
            a->st.reports++;
            a->st.reports_failed++;
        }
        pthread_mutex_unlock(&a->mu);
        if (closed)
            s = MP_PYRO_E_STATE;
    }
    free(typed);
    return s;
}

void mp_pyro_agent_free(mp_pyro_agent *a)
{
    if (!a)
        return;
    mp_pyro_agent_stop(a);
    agent_destroy(a);
}

void mp_pyro_agent_stats(const mp_pyro_agent *ca, mp_pyro_stats *out)
{
    if (!ca || !out)
        return;
    mp_pyro_agent *a = (mp_pyro_agent *)(uintptr_t)ca;
    pthread_mutex_lock(&a->mu);
    *out = a->st;
    out->queue_depth = a->q.len + (a->inflight ? 1u : 0u);
    pthread_mutex_unlock(&a->mu);
    if (a->spool)
        mp_pyro_spool_counts(a->spool, &out->spool_files, &out->spool_bytes, &out->spool_foreign);
}

mp_pyro_status mp_pyro_agent_last_error(const mp_pyro_agent *ca, char *buf, size_t len)
{
    if (!ca)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_agent *a = (mp_pyro_agent *)(uintptr_t)ca;
    pthread_mutex_lock(&a->mu);
    mp_pyro_status s = a->last_status;
    mp_pyro_fmt(buf, len, "%s", a->last_error);
    pthread_mutex_unlock(&a->mu);
    return s;
}
