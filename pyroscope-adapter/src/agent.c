/* The agent: a reporter thread that asks the backend for a profile at
 * every wall-clock multiple of the interval, and an uploader thread that
 * delivers the queue oldest first with retries, then the spool.
 *
 * Invariants (under a->mu):
 *  - every profile put in the queue is counted once in reports_queued and
 *    ends in exactly one of uploaded / dropped_* / spooled, or is still in
 *    the queue or in flight (see mp_pyro_stats);
 *  - windows are contiguous: each report's `from` is the previous `until`
 *    (the first `from` is the agent's start), so nothing is reported twice
 *    or skipped even when boundaries are missed;
 *  - the queue is strictly FIFO: a profile waiting for its retry blocks the
 *    younger ones (the server is failing for them too). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_int.h"
#include "config_int.h"
#include "http.h"
#include "queue.h"
#include "request.h"
#include "retry.h"
#include "upload.h"

typedef enum dispose_reason {
    DISPOSE_OVERFLOW,   /* queue full */
    DISPOSE_EXHAUSTED,  /* retry budget spent */
    DISPOSE_KEEP,       /* not retryable, profile fine */
    DISPOSE_DEADLINE    /* stop deadline */
} dispose_reason;

struct mp_pyro_agent {
    mp_pyro_config *cfg;
    mp_pyro_backend *backend;
    char spy[64];
    mp_pyro_http *http;
    mp_pyro_spool *spool;
    mp_pyro_rng rng;            /* uploader thread only */

    pthread_mutex_t mu;
    pthread_cond_t rep_cv;      /* CLOCK_REALTIME: report boundaries */
    pthread_cond_t up_cv;       /* CLOCK_MONOTONIC: retries, deadline */
    pthread_t reporter, uploader;
    pthread_mutex_t stop_mu;

    /* under mu */
    mp_pyro_queue q;
    bool inflight;
    bool stopping;
    bool reporter_done;
    bool uploader_done;
    bool stopped;
    int64_t last_boundary_ns;   /* reporter: `from` of the next window */
    int64_t flush_deadline_ns;  /* monotonic, set by stop */
    int64_t spool_retry_at_ns;  /* monotonic: spool resend backoff */
    uint32_t spool_attempts;
    uint64_t disposed_at_stop;
    mp_pyro_stats st;
    mp_pyro_status last_status;
    char last_error[MP_PYRO_ERRLEN];
    mp_pyro_status stop_status;

    _Atomic int64_t abort_at;   /* deadline for a request in flight */
};

static struct timespec ts_of(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

static void set_error(mp_pyro_agent *a, mp_pyro_status s, const char *msg)
{
    a->last_status = s;
    mp_pyro_fmt(a->last_error, sizeof a->last_error, "%s", msg);
}

/* Spools or drops `it` (called without a->mu) and counts the outcome. */
static void dispose(mp_pyro_agent *a, mp_pyro_item *it, dispose_reason why)
{
    static const char *const what[] = {"the queue is full", "its retry budget is spent",
                                       "the request cannot succeed as configured",
                                       "the flush deadline passed"};
    bool spooled = false;
    uint64_t evicted = 0;
    char err[MP_PYRO_ERRLEN] = "";
    if (a->spool) {
        mp_pyro_status s = mp_pyro_spool_put(a->spool, &a->cfg->series, a->spy, it, &evicted, err,
                                             sizeof err);
        spooled = s == MP_PYRO_OK;
    }
    pthread_mutex_lock(&a->mu);
    if (spooled) {
        a->st.spooled++;
        a->st.spool_evicted += evicted;
    } else if (a->spool) {
        a->st.dropped_spool_io++;
        set_error(a, MP_PYRO_E_IO, err);
    } else {
        switch (why) {
        case DISPOSE_OVERFLOW: a->st.dropped_queue_full++; break;
        case DISPOSE_EXHAUSTED: a->st.dropped_retry_exhausted++; break;
        case DISPOSE_KEEP: a->st.dropped_rejected++; break;
        case DISPOSE_DEADLINE: a->st.dropped_stop_deadline++; break;
        }
    }
    if (why == DISPOSE_DEADLINE)
        a->disposed_at_stop++;
    pthread_mutex_unlock(&a->mu);
    if (spooled)
        mp_pyro_log(a->cfg, MP_PYRO_LOG_WARN, "profile %lld..%lld spooled: %s%s",
                    (long long)(it->from_ns / 1000000), (long long)(it->until_ns / 1000000),
                    what[why], evicted ? " (older spool files evicted)" : "");
    else
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "profile %lld..%lld dropped: %s%s%s",
                    (long long)(it->from_ns / 1000000), (long long)(it->until_ns / 1000000),
                    what[why], err[0] ? "; spool: " : "", err);
    mp_pyro_item_free(it);
}

/* --- reporter ---------------------------------------------------------- */

/* Puts a gzipped profile in the queue (dropping or spooling the oldest
 * when full). Called without a->mu. */
static void enqueue(mp_pyro_agent *a, mp_pyro_item it)
{
    mp_pyro_item oldest;
    bool overflow = false;
    pthread_mutex_lock(&a->mu);
    a->st.reports_queued++;
    if (a->uploader_done) {
        /* a submit that raced with stop: nobody will send it */
        pthread_mutex_unlock(&a->mu);
        dispose(a, &it, DISPOSE_DEADLINE);
        return;
    }
    if (mp_pyro_queue_full(&a->q))
        overflow = mp_pyro_queue_pop_front(&a->q, &oldest);
    mp_pyro_queue_push_back(&a->q, it);
    uint64_t depth = a->q.len + (a->inflight ? 1u : 0u);
    if (depth > a->st.queue_high_water)
        a->st.queue_high_water = depth;
    pthread_cond_signal(&a->up_cv);
    pthread_mutex_unlock(&a->mu);
    if (overflow)
        dispose(a, &oldest, DISPOSE_OVERFLOW);
}

static void take_report(mp_pyro_agent *a, mp_pyro_window w)
{
    mp_pyro_backend *b = a->backend;
    mp_pyro_profile p = {0};
    mp_pyro_status s = b->ops->report(b->state, &w, &p);
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    if (s == MP_PYRO_OK && p.len)
        s = mp_pyro_gzip(p.pprof, p.len, &gz, &gz_len);
    bool empty = s == MP_PYRO_OK && p.len == 0;
    b->ops->release(b->state, &p);

    pthread_mutex_lock(&a->mu);
    a->st.reports++;
    if (s != MP_PYRO_OK) {
        a->st.reports_failed++;
        char msg[MP_PYRO_ERRLEN];
        mp_pyro_fmt(msg, sizeof msg, "backend %s report failed: %s%s%s", a->spy,
                    mp_pyro_strerror(s), b->error[0] ? ": " : "", b->error);
        set_error(a, s, msg);
        pthread_mutex_unlock(&a->mu);
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "%s", msg);
        return;
    }
    if (empty)
        a->st.reports_empty++;
    pthread_mutex_unlock(&a->mu);
    if (!empty)
        enqueue(a, (mp_pyro_item){.gz = gz, .gz_len = gz_len, .from_ns = w.from_nanos,
                                  .until_ns = w.until_nanos});
}

static void *reporter_main(void *arg)
{
    mp_pyro_agent *a = arg;
    const int64_t interval = (int64_t)a->cfg->interval_ms * 1000000;
    pthread_mutex_lock(&a->mu);
    int64_t next = (a->last_boundary_ns / interval + 1) * interval;
    while (!a->stopping) {
        struct timespec ts = ts_of(next);
        pthread_cond_timedwait(&a->rep_cv, &a->mu, &ts);
        if (a->stopping)
            break;
        int64_t now = mp_pyro_now_real_ns();
        if (now < next)
            continue;
        mp_pyro_window w = {a->last_boundary_ns, next};
        a->last_boundary_ns = next;
        next += interval;
        if (next <= now)
            next = (now / interval + 1) * interval;
        pthread_mutex_unlock(&a->mu);
        take_report(a, w);
        pthread_mutex_lock(&a->mu);
    }
    mp_pyro_window last = {a->last_boundary_ns, mp_pyro_now_real_ns()};
    pthread_mutex_unlock(&a->mu);
    if (last.until_nanos > last.from_nanos)
        take_report(a, last);
    mp_pyro_status s = a->backend->ops->stop(a->backend->state);
    if (s != MP_PYRO_OK)
        mp_pyro_log(a->cfg, MP_PYRO_LOG_WARN, "backend %s stop: %s", a->spy, mp_pyro_strerror(s));
    pthread_mutex_lock(&a->mu);
    a->reporter_done = true;
    pthread_cond_broadcast(&a->up_cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* --- uploader ---------------------------------------------------------- */

/* Called with a->mu held; returns with it held. */
static void send_head(mp_pyro_agent *a)
{
    mp_pyro_item it;
    mp_pyro_queue_pop_front(&a->q, &it);
    a->inflight = true;
    int64_t started = mp_pyro_now_mono_ns();
    if (it.attempts == 0)
        it.first_attempt_ns = started;
    pthread_mutex_unlock(&a->mu);

    mp_pyro_http_result res;
    size_t body_len;
    mp_pyro_send_profile(a->http, a->cfg, &a->cfg->series, a->spy, it.gz, it.gz_len, it.from_ns,
                         it.until_ns, &a->rng, &a->abort_at, &res, &body_len);
    mp_pyro_log(a->cfg, MP_PYRO_LOG_DEBUG, "upload %lld..%lld attempt %u: %s",
                (long long)(it.from_ns / 1000000), (long long)(it.until_ns / 1000000),
                it.attempts + 1, res.status == MP_PYRO_OK ? "ok" : res.message);

    pthread_mutex_lock(&a->mu);
    a->inflight = false;
    a->st.requests++;
    if (it.attempts > 0)
        a->st.retries++;
    it.attempts++;
    if (res.status == MP_PYRO_OK) {
        a->st.uploaded++;
        a->st.bytes_sent += body_len;
        mp_pyro_item_free(&it);
        return;
    }
    mp_pyro_count_failure(&a->st, res.status);
    set_error(a, res.status, res.message);
    mp_pyro_fate fate = mp_pyro_failure_fate(res.status, res.http_code);
    if (fate == MP_PYRO_FATE_REJECT) {
        a->st.dropped_rejected++;
        pthread_mutex_unlock(&a->mu);
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "profile %lld..%lld rejected, not retried: %s",
                    (long long)(it.from_ns / 1000000), (long long)(it.until_ns / 1000000),
                    res.message);
        mp_pyro_item_free(&it);
        pthread_mutex_lock(&a->mu);
        return;
    }
    dispose_reason why = DISPOSE_KEEP;
    if (fate == MP_PYRO_FATE_RETRY) {
        int64_t now = mp_pyro_now_mono_ns();
        int64_t next = now + mp_pyro_backoff_ns(&a->cfg->retry, it.attempts, &a->rng);
        if (mp_pyro_retry_allowed(&a->cfg->retry, it.attempts, it.first_attempt_ns, next)) {
            it.next_attempt_ns = next;
            if (!mp_pyro_queue_full(&a->q)) {
                mp_pyro_queue_push_front(&a->q, it);
                pthread_mutex_unlock(&a->mu);
                mp_pyro_log(a->cfg, MP_PYRO_LOG_WARN, "upload failed, retry %u in %lld ms: %s",
                            it.attempts, (long long)((next - now) / 1000000), res.message);
                pthread_mutex_lock(&a->mu);
                return;
            }
            why = DISPOSE_OVERFLOW;
        } else {
            why = DISPOSE_EXHAUSTED;
        }
    }
    pthread_mutex_unlock(&a->mu);
    mp_pyro_log(a->cfg, MP_PYRO_LOG_WARN, "upload failed: %s", res.message);
    dispose(a, &it, why);
    pthread_mutex_lock(&a->mu);
}

/* Resends the oldest spool file. Called with a->mu held; returns with it held. */
static void send_spooled(mp_pyro_agent *a)
{
    pthread_mutex_unlock(&a->mu);
    mp_pyro_spool_entry e;
    uint64_t expired, corrupt;
    mp_pyro_status s = mp_pyro_spool_peek(a->spool, &e, &expired, &corrupt);
    mp_pyro_http_result res = {0};
    size_t body_len = 0;
    if (s == MP_PYRO_OK && e.path)
        mp_pyro_send_profile(a->http, a->cfg, &e.series, e.spy, e.gz, e.gz_len, e.from_ns,
                             e.until_ns, &a->rng, &a->abort_at, &res, &body_len);
    pthread_mutex_lock(&a->mu);
    a->st.spool_expired += expired;
    a->st.spool_corrupt += corrupt;
    if (s != MP_PYRO_OK || !e.path) {
        mp_pyro_spool_entry_free(&e);
        return;
    }
    a->st.requests++;
    if (a->spool_attempts > 0)
        a->st.retries++;
    mp_pyro_fate fate = mp_pyro_failure_fate(res.status, res.http_code);
    if (fate == MP_PYRO_FATE_DONE || fate == MP_PYRO_FATE_REJECT) {
        if (fate == MP_PYRO_FATE_DONE) {
            a->st.spool_resent++;
            a->st.bytes_sent += body_len;
        } else {
            mp_pyro_count_failure(&a->st, res.status);
            a->st.spool_rejected++;
            set_error(a, res.status, res.message);
        }
        a->spool_attempts = 0;
        a->spool_retry_at_ns = 0;
        pthread_mutex_unlock(&a->mu);
        mp_pyro_spool_remove(a->spool, &e);
        mp_pyro_log(a->cfg, fate == MP_PYRO_FATE_DONE ? MP_PYRO_LOG_INFO : MP_PYRO_LOG_ERROR,
                    "spooled profile %lld..%lld %s%s", (long long)(e.from_ns / 1000000),
                    (long long)(e.until_ns / 1000000),
                    fate == MP_PYRO_FATE_DONE ? "delivered" : "rejected, deleted: ",
                    fate == MP_PYRO_FATE_DONE ? "" : res.message);
        pthread_mutex_lock(&a->mu);
    } else {
        mp_pyro_count_failure(&a->st, res.status);
        set_error(a, res.status, res.message);
        a->spool_attempts++;
        a->spool_retry_at_ns = mp_pyro_now_mono_ns() +
                               mp_pyro_backoff_ns(&a->cfg->retry, a->spool_attempts, &a->rng);
    }
    mp_pyro_spool_entry_free(&e);
}

/* Waits for a signal or until `mono_ns` (0 = no timeout). A deadline that
 * has passed while the reporter is still taking its final report becomes
 * "no timeout": its completion is signalled. */
static void wait_until(mp_pyro_agent *a, int64_t mono_ns)
{
    if (mono_ns > 0 && a->stopping && !a->reporter_done && mono_ns <= mp_pyro_now_mono_ns())
        mono_ns = 0;
    if (mono_ns <= 0) {
        pthread_cond_wait(&a->up_cv, &a->mu);
    } else {
        struct timespec ts = ts_of(mono_ns);
        pthread_cond_timedwait(&a->up_cv, &a->mu, &ts);
    }
}

static bool spool_pending(mp_pyro_agent *a)
{
    if (!a->spool)
        return false;
    uint64_t files, bytes;
    mp_pyro_spool_counts(a->spool, &files, &bytes);
    return files > 0;
}

static void *uploader_main(void *arg)
{
    mp_pyro_agent *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        int64_t now = mp_pyro_now_mono_ns();
        bool flushing = a->stopping && a->reporter_done;
        if (flushing && (a->q.len == 0 || now >= a->flush_deadline_ns))
            break;
        const mp_pyro_item *head = mp_pyro_queue_front(&a->q);
        if (head) {
            if (a->stopping && head->next_attempt_ns > a->flush_deadline_ns && !head->last_chance) {
                /* its backoff ends after the flush deadline: one last
                 * attempt now rather than none (the server may be back) */
                mp_pyro_item *h = (mp_pyro_item *)(uintptr_t)head;
                h->last_chance = true;
                h->next_attempt_ns = now;
            }
            if (head->next_attempt_ns > now) {
                int64_t until = head->next_attempt_ns;
                if (a->stopping && a->flush_deadline_ns < until)
                    until = a->flush_deadline_ns;
                wait_until(a, until);
                continue;
            }
            send_head(a);
            continue;
        }
        if (!a->stopping && spool_pending(a)) {
            if (a->spool_retry_at_ns <= now) {
                send_spooled(a);
                continue;
            }
            wait_until(a, a->spool_retry_at_ns);
            continue;
        }
        wait_until(a, a->stopping ? a->flush_deadline_ns : 0);
    }
    a->uploader_done = true;
    mp_pyro_item it;
    while (mp_pyro_queue_pop_front(&a->q, &it)) {
        pthread_mutex_unlock(&a->mu);
        dispose(a, &it, DISPOSE_DEADLINE);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* --- public API ---------------------------------------------------------- */

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
                               &a->spool, err, sizeof err);
        if (s != MP_PYRO_OK) {
            mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "not started: %s", err);
            agent_destroy(a);
            return s;
        }
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
    if (pthread_create(&a->uploader, NULL, uploader_main, a) != 0) {
        if (backend) {
            backend->ops->stop(backend->state);
            atomic_store(&backend->in_use, false);
        }
        agent_destroy(a);
        return MP_PYRO_E_NOMEM;
    }
    if (backend && pthread_create(&a->reporter, NULL, reporter_main, a) != 0) {
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
    mp_pyro_log(a->cfg, MP_PYRO_LOG_INFO, "stopped: %llu uploaded, %llu spooled, %llu left at the "
                "deadline", (unsigned long long)a->st.uploaded, (unsigned long long)a->st.spooled,
                (unsigned long long)a->disposed_at_stop);
    pthread_mutex_unlock(&a->stop_mu);
    return a->stop_status;
}

mp_pyro_status mp_pyro_agent_submit(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                    int64_t from_nanos, int64_t until_nanos)
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
    uint8_t *gz;
    size_t gz_len;
    mp_pyro_status s = mp_pyro_gzip(pprof, len, &gz, &gz_len);
    if (s != MP_PYRO_OK) {
        pthread_mutex_lock(&a->mu);
        a->st.reports_failed++;
        pthread_mutex_unlock(&a->mu);
        return s;
    }
    enqueue(a, (mp_pyro_item){.gz = gz, .gz_len = gz_len, .from_ns = from_nanos,
                              .until_ns = until_nanos});
    return MP_PYRO_OK;
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
        mp_pyro_spool_counts(a->spool, &out->spool_files, &out->spool_bytes);
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
