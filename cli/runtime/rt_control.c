/* SPDX-License-Identifier: MIT */
/* The preload runtime as the host of the profiling library's control
 * (<mimprof/profiling_control.h>, rt_state.h): `mimprof ctl` status,
 * start, stop, report, image and set interval as this runtime does them
 * (its reporter, report files and uploads), run on the control's
 * thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload_runtime.h"
#include "rt_env.h"
#include "rt_pyro.h"
#include "rt_state.h"

/* ---- control (<mimprof/profiling_control.h>) ------------------------- */

/* The hooks of the control: status, start, stop and report as this
 * runtime does them (its reporter, files and uploads); run on the
 * control's thread. */
static void ctl_state(void *ctx, mp_prof_control_state *st)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    st->running = mpt_rt.started;
    st->interval = mpt_rt.started ? mpt_rt.session_interval : mpt_rt.cfg.sample_interval_bytes;
    st->next_interval = mpt_rt.cfg.sample_interval_bytes;
    st->every_ms = mpt_rt.every_ms;
    st->report_at_exit = true;
    st->output =
        mpt_rt.files ? (mpt_rt.out.dir[0] != '\0' ? mpt_rt.out.dir : mpt_rt.out.pattern) : "";
    pthread_mutex_lock(
        &mpt_rt.report_lock); /* the agent starts under it (mpt_rt_take_report_locked) */
    uint64_t uploaded = 0, lost = 0;
    const char *service = mpt_rt_pyro_progress(&uploaded, &lost);
    if (service[0] != '\0')
        snprintf(st->upload, sizeof st->upload, "on (service_name=%s): %llu uploaded, %llu lost",
                 service, (unsigned long long)uploaded, (unsigned long long)lost);
    st->reports = mpt_rt.reports;
    st->last_report_ns = mpt_rt.last_report_ns;
    pthread_mutex_unlock(&mpt_rt.report_lock);
    pthread_mutex_unlock(&mpt_rt.lock);
}

static mp_prof_status ctl_start(void *ctx, uint64_t interval, int64_t every_ms, char *why,
                                size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    mp_prof_status st = MP_PROF_E_BUSY;
    if (mpt_rt.started) {
        snprintf(why, whylen, "a session is already running");
    } else {
        if (interval != 0)
            mpt_rt.cfg.sample_interval_bytes = (size_t)interval;
        if (every_ms >= 0)
            mpt_rt.every_ms = (uint64_t)every_ms;
        st = mpt_rt_start_locked() == 0 ? MP_PROF_OK : MP_PROF_E_INTERNAL;
        if (st != MP_PROF_OK)
            snprintf(why, whylen, "the session did not start (see the process's stderr)");
    }
    pthread_mutex_unlock(&mpt_rt.lock);
    return st;
}

/* Writes the session's last report (as at exit) and stops it: dormant
 * again. */
static mp_prof_status ctl_stop(void *ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    mp_prof_status st = MP_PROF_E_INACTIVE;
    if (!mpt_rt.started) {
        snprintf(why, whylen, "dormant: no session to stop");
    } else {
        mpt_rt_end_session_locked(false);
        /* The live table and the free filter are empty now: the dormant
         * object's malloc and free may skip them again. */
        mp_preload_set_sampling(false);
        st = MP_PROF_OK;
    }
    pthread_mutex_unlock(&mpt_rt.lock);
    return st;
}

/* `st`, with its reason in `why` when it failed. */
static mp_prof_status why_not(mp_prof_status st, bool started, char *why, size_t whylen)
{
    if (st != MP_PROF_OK)
        snprintf(why, whylen, "%s",
                 started ? mp_prof_strerror(st) : "dormant: start a session first");
    return st;
}

/* A report asked for by `mimprof ctl` or /debug/pprof is on disk when
 * the answer comes, as without a collector: this (the control's) thread
 * waits for the collector to have written it, at most 5 s; the
 * program's threads never wait. */
static void wait_for_collector(unsigned seq)
{
    char path[4200];
    if (mpt_out_name(&mpt_rt.out, mpt_rt.pid, seq, path, sizeof path) != 0)
        return;
    for (int i = 0; i < 500 && access(path, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
}

/* A report now: one of the process's series like any other, written to
 * the output (when reports are written) and uploaded (when uploading),
 * so that no window of allocations is lost anywhere, and fed to the
 * control (mpt_rt_take_report_locked). */
static mp_prof_status ctl_report(void *ctx, uint8_t **buf, size_t *len, void (*then)(void *),
                                 void *then_ctx, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    mp_prof_status st = MP_PROF_E_INACTIVE;
    mpt_rt_window w;
    bool collected = false;
    if (mpt_rt.started) {
        uint8_t *pk = NULL;
        size_t pklen = 0;
        pthread_mutex_lock(&mpt_rt.report_lock);
        st = mpt_rt_take_report_locked(NULL, buf, len, &pk, &pklen, &w);
        if (st == MP_PROF_OK && then != NULL)
            then(then_ctx);
        pthread_mutex_unlock(&mpt_rt.report_lock);
        collected = st == MP_PROF_OK && mpt_rt_write_report(*buf, *len, pk, pklen, &w);
        mp_prof_buffer_free(pk);
    }
    bool started = mpt_rt.started;
    pthread_mutex_unlock(&mpt_rt.lock);
    if (collected)
        wait_for_collector(w.seq);
    return why_not(st, started, why, whylen);
}

static mp_prof_status ctl_image(void *ctx, const char *path, char *why, size_t whylen)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    mp_prof_status st =
        mpt_rt.started ? mp_profiler_write_image(mpt_rt.prof, path) : MP_PROF_E_INACTIVE;
    bool started = mpt_rt.started;
    pthread_mutex_unlock(&mpt_rt.lock);
    return why_not(st, started, why, whylen);
}

static void ctl_set_interval(void *ctx, uint64_t interval)
{
    (void)ctx;
    pthread_mutex_lock(&mpt_rt.lock);
    mpt_rt.cfg.sample_interval_bytes = (size_t)interval;
    pthread_mutex_unlock(&mpt_rt.lock);
}

/* after_fork_child decided it (it runs first). */
static bool ctl_fork_child(void *ctx)
{
    (void)ctx;
    return mpt_rt.ctl_child_serves;
}

static void ctl_log(void *ctx, const char *line)
{
    (void)ctx;
    say_error("%s", line);
}

static const mp_prof_control_hooks CTL_HOOKS = {
    .state = ctl_state,
    .start = ctl_start,
    .stop = ctl_stop,
    .report = ctl_report,
    .image = ctl_image,
    .set_interval = ctl_set_interval,
    .fork_child = ctl_fork_child,
    .log = ctl_log,
};

/* Opens the control (MIMPROF_CTL, MIMPROF_HTTP); its control socket
 * hosted by the collector when `host` is not NULL (rt_ctlhost.h) and no
 * HTTP endpoint is asked for; mpt_rt.lock held. One that
 * cannot be served is said on stderr and the other one is served alone.
 * 0, or -1 (neither). */
int mpt_rt_open_control(bool ctl, const char *http, const mp_prof_control_host *host)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.ctl = ctl;
    o.host = http == NULL ? host : NULL;
    o.http = http;
    o.http_wildcard = mpt_env_flag(MPT_ENV_HTTP_WILDCARD, false);
    o.quiet = mpt_rt.quiet;
    char why[600];
    while (mp_prof_control_open(&o, &CTL_HOOKS, &mpt_rt.control, why, sizeof why) != MP_PROF_OK) {
        mpt_rt.control = NULL;
        bool http_failed = strncmp(why, "http: ", 6) == 0;
        if (http_failed)
            say_error("mimprof: %s; not serving /debug/pprof\n", why);
        else
            say("mimprof: %s\n", why);
        if (http_failed && o.ctl)
            o.http = NULL; /* the control socket alone */
        else if (!http_failed && o.ctl && o.http != NULL && strncmp(why, "ctl: ", 5) == 0)
            o.ctl = false; /* /debug/pprof alone */
        else
            return -1;
    }
    return 0;
}

void mpt_rt_close_control(void) { mp_prof_control_close(mpt_rt.control); }
