/* SPDX-License-Identifier: MIT */
/* The uploader thread: the queue oldest first, retries with backoff, the
 * spool when idle, the flush at stop; and what happens to a profile that
 * cannot be delivered (spool or a drop counter). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "agent_internal.h"
#include "retry.h"
#include "upload.h"

void mp_pyro_agent_set_error(mp_pyro_agent *a, mp_pyro_status s, const char *msg)
{
    a->last_status = s;
    mp_pyro_fmt(a->last_error, sizeof a->last_error, "%s", msg);
}

/* Spools or drops `it` (called without a->mu) and counts the outcome. */
void mp_pyro_agent_dispose(mp_pyro_agent *a, mp_pyro_item *it, dispose_reason why)
{
    static const char *const what[] = {"the queue is full", "its retry budget is spent",
                                       "the request cannot succeed as configured",
                                       "the flush deadline passed"};
    bool spooled = false;
    uint64_t evicted = 0;
    char err[MP_PYRO_ERRLEN] = "";
    if (a->spool) {
        mp_pyro_status s =
            mp_pyro_spool_put(a->spool, &a->cfg->series, a->spy, it, &evicted, err, sizeof err);
        spooled = s == MP_PYRO_OK;
    }
    pthread_mutex_lock(&a->mu);
    if (spooled) {
        a->st.spooled++;
        a->st.spool_evicted += evicted;
    } else if (a->spool) {
        a->st.dropped_spool_io++;
        mp_pyro_agent_set_error(a, MP_PYRO_E_IO, err);
    } else {
        switch (why) {
        case DISPOSE_OVERFLOW:
            a->st.dropped_queue_full++;
            break;
        case DISPOSE_EXHAUSTED:
            a->st.dropped_retry_exhausted++;
            break;
        case DISPOSE_KEEP:
            a->st.dropped_rejected++;
            break;
        case DISPOSE_DEADLINE:
            a->st.dropped_stop_deadline++;
            break;
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

/* Logs a rejection by the server at ERROR once per kind of message (the
 * same message but for its numbers), then at DEBUG: every profile is
 * counted, the log is not flooded by one cause. Called without a->mu. */
static void log_rejection(mp_pyro_agent *a, const char *what, int64_t from_ns, int64_t until_ns,
                          const char *message)
{
    bool again = mp_pyro_same_message(a->last_rejection, message);
    if (!again)
        mp_pyro_fmt(a->last_rejection, sizeof a->last_rejection, "%s", message);
    mp_pyro_log(a->cfg, again ? MP_PYRO_LOG_DEBUG : MP_PYRO_LOG_ERROR,
                "%s %lld..%lld rejected, not retried%s: %s", what, (long long)(from_ns / 1000000),
                (long long)(until_ns / 1000000),
                again ? "" : " (further rejections like it are counted, logged at debug level)",
                message);
}

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
    mp_pyro_agent_set_error(a, res.status, res.message);
    mp_pyro_fate fate = mp_pyro_failure_fate(res.status, res.http_code);
    if (fate == MP_PYRO_FATE_REJECT) {
        a->st.dropped_rejected++;
        pthread_mutex_unlock(&a->mu);
        log_rejection(a, "profile", it.from_ns, it.until_ns, res.message);
        mp_pyro_item_free(&it);
        pthread_mutex_lock(&a->mu);
        return;
    }
    dispose_reason why = DISPOSE_KEEP;
    if (fate == MP_PYRO_FATE_RETRY) {
        int64_t now = mp_pyro_now_mono_ns();
        int64_t next = now + mp_pyro_backoff_ns(&a->cfg->retry, it.attempts, &a->rng);
        /* the server would refuse it by then: its age counts from its start */
        int64_t age_then = mp_pyro_now_real_ns() + (next - now) - it.from_ns;
        if (mp_pyro_retry_allowed(&a->cfg->retry, it.attempts, it.first_attempt_ns, next) &&
            age_then <= (int64_t)MP_PYRO_MAX_SPOOL_AGE_S * 1000000000) {
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
    mp_pyro_agent_dispose(a, &it, why);
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
            mp_pyro_agent_set_error(a, res.status, res.message);
        }
        a->spool_attempts = 0;
        a->spool_retry_at_ns = 0;
        pthread_mutex_unlock(&a->mu);
        mp_pyro_spool_remove(a->spool, &e);
        if (fate == MP_PYRO_FATE_DONE)
            mp_pyro_log(a->cfg, MP_PYRO_LOG_INFO, "spooled profile %lld..%lld delivered",
                        (long long)(e.from_ns / 1000000), (long long)(e.until_ns / 1000000));
        else
            log_rejection(a, "spooled profile (deleted)", e.from_ns, e.until_ns, res.message);
        pthread_mutex_lock(&a->mu);
    } else {
        mp_pyro_count_failure(&a->st, res.status);
        mp_pyro_agent_set_error(a, res.status, res.message);
        a->spool_attempts++;
        a->spool_retry_at_ns =
            mp_pyro_now_mono_ns() + mp_pyro_backoff_ns(&a->cfg->retry, a->spool_attempts, &a->rng);
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
        struct timespec ts = mp_pyro_ts_of(mono_ns);
        pthread_cond_timedwait(&a->up_cv, &a->mu, &ts);
    }
}

static bool spool_pending(mp_pyro_agent *a)
{
    if (!a->spool)
        return false;
    uint64_t files, bytes, foreign;
    mp_pyro_spool_counts(a->spool, &files, &bytes, &foreign);
    return files > foreign;
}

void *mp_pyro_uploader_main(void *arg)
{
    mp_pyro_agent *a = arg;
    /* Uploading (libcurl, TLS, the spool) is the profiler's work: in a
     * process mimprof profiles, none of it is sampled into the profiles
     * it uploads. A no-op effect where no session runs. */
    mp_prof_thread_exclude();
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
        mp_pyro_agent_dispose(a, &it, DISPOSE_DEADLINE);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}
