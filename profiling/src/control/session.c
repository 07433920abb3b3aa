/* SPDX-License-Identifier: MIT */
/* The session operations of a control opened without hooks
 * (<mimprof/profiling_control.h>): a session of the control's own over
 * mp_profiler_*, started and stopped on request, reports and images on
 * request only (there is no periodic reporter, no file, no upload).
 *
 * s.lock serialises every operation, and with them the reports fed to
 * the HTTP endpoint's cumulative profile (control.h). The operations run
 * on the control's thread; close and the fork handler take the same
 * lock (a fork child reinitialises it). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <mimprof/profiling.h>

#include "control.h"

static struct {
    pthread_mutex_t lock;
    mp_prof_config cfg; /* of the next session */
    mp_profiler *prof;  /* NULL: dormant */
    mp_profiler *stale; /* a fork child's copy of the parent's, freed later */
    size_t interval;    /* of the running session */
    unsigned reports;
    int64_t last_report_ns;
} s = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char DORMANT[] = "dormant: start a session first";

/* A fork child's inherited handle, released once the profiler's own
 * fork handlers have run (s.lock held). */
static void free_stale(void)
{
    mp_profiler_free(s.stale);
    s.stale = NULL;
}

void mpc_session_init(const mp_prof_config *cfg)
{
    pthread_mutex_lock(&s.lock);
    s.cfg = *cfg;
    s.reports = 0;
    s.last_report_ns = 0;
    pthread_mutex_unlock(&s.lock);
}

static void state(void *ctx, mp_prof_control_state *st)
{
    (void)ctx;
    pthread_mutex_lock(&s.lock);
    st->running = s.prof != NULL;
    st->interval = s.prof != NULL ? s.interval : s.cfg.sample_interval_bytes;
    st->next_interval = s.cfg.sample_interval_bytes;
    st->reports = s.reports;
    st->last_report_ns = s.last_report_ns;
    pthread_mutex_unlock(&s.lock);
}

static mp_prof_status start(void *ctx, uint64_t interval, int64_t every_ms, char *why,
                            size_t whylen)
{
    (void)ctx;
    if (every_ms > 0) {
        snprintf(why, whylen, "every: this process takes reports on request only");
        return MP_PROF_E_INVALID_CONFIG;
    }
    pthread_mutex_lock(&s.lock);
    mp_prof_status st = MP_PROF_E_BUSY;
    if (s.prof != NULL) {
        snprintf(why, whylen, "a session is already running");
    } else {
        free_stale();
        if (interval != 0)
            s.cfg.sample_interval_bytes = (size_t)interval;
        st = mp_profiler_start(&s.cfg, &s.prof);
        if (st == MP_PROF_OK) {
            s.interval = s.cfg.sample_interval_bytes;
            mpc_http_session_started();
        } else {
            snprintf(why, whylen, "the session did not start: %s", mp_prof_strerror(st));
        }
    }
    pthread_mutex_unlock(&s.lock);
    return st;
}

static mp_prof_status stop(void *ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&s.lock);
    mp_prof_status st = s.prof != NULL ? MP_PROF_OK : MP_PROF_E_INACTIVE;
    if (s.prof == NULL)
        snprintf(why, whylen, "dormant: no session to stop");
    free_stale();
    mp_profiler_free(s.prof);
    s.prof = NULL;
    pthread_mutex_unlock(&s.lock);
    return st;
}

static mp_prof_status report(void *ctx, uint8_t **pprof, size_t *len, void (*then)(void *),
                             void *then_ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&s.lock);
    mp_prof_status st =
        s.prof != NULL ? mp_profiler_report(s.prof, pprof, len) : MP_PROF_E_INACTIVE;
    if (st == MP_PROF_OK) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        s.reports++;
        s.last_report_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
        (void)mpc_http_feed(*pprof, *len);
        if (then != NULL)
            then(then_ctx);
    } else {
        snprintf(why, whylen, "%s", s.prof != NULL ? mp_prof_strerror(st) : DORMANT);
    }
    pthread_mutex_unlock(&s.lock);
    return st;
}

static mp_prof_status image(void *ctx, const char *path, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&s.lock);
    mp_prof_status st = s.prof != NULL ? mp_profiler_write_image(s.prof, path) : MP_PROF_E_INACTIVE;
    if (st != MP_PROF_OK)
        snprintf(why, whylen, "%s", s.prof != NULL ? mp_prof_strerror(st) : DORMANT);
    pthread_mutex_unlock(&s.lock);
    return st;
}

static void set_interval(void *ctx, uint64_t interval)
{
    (void)ctx;
    pthread_mutex_lock(&s.lock);
    s.cfg.sample_interval_bytes = (size_t)interval;
    pthread_mutex_unlock(&s.lock);
}

const mp_prof_control_hooks mpc_session_hooks = {
    .state = state,
    .start = start,
    .stop = stop,
    .report = report,
    .image = image,
    .set_interval = set_interval,
};

void mpc_session_end(void)
{
    pthread_mutex_lock(&s.lock);
    free_stale();
    mp_profiler_free(s.prof);
    s.prof = NULL;
    pthread_mutex_unlock(&s.lock);
}

void mpc_session_after_fork(void)
{
    /* The core ends the parent's session in this child, in a fork
     * handler that may run after this one (the profiler's locks are
     * still held here): the handle is released later, by the next
     * operation. */
    pthread_mutex_init(&s.lock, NULL);
    if (s.prof != NULL)
        s.stale = s.prof;
    s.prof = NULL;
    s.reports = 0;
    s.last_report_ns = 0;
}
