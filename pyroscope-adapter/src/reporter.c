/* SPDX-License-Identifier: MIT */
/* The reporter thread: one backend report per wall-clock multiple of the
 * interval, a final one at stop; each queued gzipped with its window. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "agent_internal.h"
#include "retype.h"
#include "upload.h"

/* Puts a gzipped profile in the queue (dropping or spooling the oldest
 * when full). Called without a->mu. */
void mp_pyro_agent_enqueue(mp_pyro_agent *a, mp_pyro_item it)
{
    mp_pyro_item oldest;
    bool overflow = false;
    pthread_mutex_lock(&a->mu);
    a->st.reports_queued++;
    if (a->uploader_done) {
        /* a submit that raced with stop: nobody will send it */
        pthread_mutex_unlock(&a->mu);
        mp_pyro_agent_dispose(a, &it, DISPOSE_DEADLINE);
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
        mp_pyro_agent_dispose(a, &oldest, DISPOSE_OVERFLOW);
}

mp_pyro_status mp_pyro_agent_queue_report(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                          int64_t from_ns, int64_t until_ns, bool renamed)
{
    mp_pyro_item *items;
    size_t n;
    char err[MP_PYRO_ERRLEN] = "";
    mp_pyro_status s =
        mp_pyro_prepare(a->cfg, a->spy, pprof, len, from_ns, until_ns, &a->stamps[renamed ? 1 : 0],
                        &a->mu, &items, &n, err, sizeof err);
    if (s != MP_PYRO_OK) {
        char msg[MP_PYRO_ERRLEN];
        mp_pyro_fmt(msg, sizeof msg, "report %lld..%lld not sent: %s",
                    (long long)(from_ns / 1000000), (long long)(until_ns / 1000000),
                    err[0] ? err : mp_pyro_strerror(s));
        pthread_mutex_lock(&a->mu);
        a->st.reports_failed++;
        mp_pyro_agent_set_error(a, s, msg);
        pthread_mutex_unlock(&a->mu);
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "%s", msg);
        return s;
    }
    pthread_mutex_lock(&a->mu);
    a->st.parts_split += n - 1;
    pthread_mutex_unlock(&a->mu);
    if (n > 1)
        mp_pyro_log(a->cfg, MP_PYRO_LOG_DEBUG, "report %lld..%lld split in %zu requests",
                    (long long)(from_ns / 1000000), (long long)(until_ns / 1000000), n);
    for (size_t i = 0; i < n; i++)
        mp_pyro_agent_enqueue(a, items[i]);
    free(items);
    return MP_PYRO_OK;
}

/* The window's peak, after the report that closed the window: its own
 * profile types (peak_inuse_*), counted like a submitted profile. */
static void take_peak(mp_pyro_agent *a, mp_pyro_window w)
{
    mp_pyro_backend *b = a->backend;
    mp_pyro_profile p = {0};
    uint8_t *typed = NULL;
    size_t len = 0;
    mp_pyro_status s = b->peak(b->state, &p);
    if (s == MP_PYRO_OK && p.len)
        s = mp_pyro_retype(p.pprof, p.len, MP_PYRO_PEAK_PREFIX, &typed, &len);
    b->ops->release(b->state, &p);
    pthread_mutex_lock(&a->mu);
    a->st.reports++;
    if (s != MP_PYRO_OK)
        a->st.reports_failed++;
    else if (len == 0)
        a->st.reports_empty++;
    pthread_mutex_unlock(&a->mu);
    if (len != 0) /* queued like the report itself, also after a stop began */
        mp_pyro_agent_queue_report(a, typed, len, w.from_nanos, w.until_nanos, true);
    free(typed);
}

static void take_report(mp_pyro_agent *a, mp_pyro_window w)
{
    mp_pyro_backend *b = a->backend;
    mp_pyro_profile p = {0};
    mp_pyro_status s = b->ops->report(b->state, &w, &p);

    pthread_mutex_lock(&a->mu);
    a->st.reports++;
    if (s != MP_PYRO_OK) {
        a->st.reports_failed++;
        char msg[MP_PYRO_ERRLEN];
        mp_pyro_fmt(msg, sizeof msg, "backend %s report failed: %s%s%s", a->spy,
                    mp_pyro_strerror(s), b->error[0] ? ": " : "", b->error);
        mp_pyro_agent_set_error(a, s, msg);
        pthread_mutex_unlock(&a->mu);
        b->ops->release(b->state, &p);
        mp_pyro_log(a->cfg, MP_PYRO_LOG_ERROR, "%s", msg);
        return;
    }
    if (p.len == 0)
        a->st.reports_empty++;
    pthread_mutex_unlock(&a->mu);
    if (p.len)
        mp_pyro_agent_queue_report(a, p.pprof, p.len, w.from_nanos, w.until_nanos, false);
    b->ops->release(b->state, &p);
    if (b->peak != NULL)
        take_peak(a, w);
}

void *mp_pyro_reporter_main(void *arg)
{
    mp_pyro_agent *a = arg;
    mp_prof_thread_exclude(); /* taking and fitting reports is the profiler's work */
    const int64_t interval = (int64_t)a->cfg->interval_ms * 1000000;
    pthread_mutex_lock(&a->mu);
    int64_t next = (a->last_boundary_ns / interval + 1) * interval;
    while (!a->stopping) {
        struct timespec ts = mp_pyro_ts_of(next);
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
