/* SPDX-License-Identifier: MIT */
/* The collector's uploads (collector.h): one profile per service and
 * window, whatever the number of processes.
 *
 * Why merge. Pyroscope keeps one profile per series and timestamp (the
 * others are replicas: DESIGN.md, "Real Pyroscope servers"): forked
 * workers that upload to the same series each window overwrite one
 * another. Here every process's report is held until its window is due,
 * and the window's reports go up as one profile (collector_merge.c), so
 * the server's total is the sum of what the workers allocated.
 *
 * Windows. Reports fall on wall-clock multiples of the period P
 * (rt_report.c); a report ending at `to` belongs to the window ending
 * at the multiple of P nearest to `to`. A process's last report (its
 * exit) belongs to the window that holds its end, the first multiple of
 * P at or after `to`: never to the one its previous report closed, whose
 * in-use snapshot it would replace (an exit 100 ms after a boundary
 * erased the boundary's report). And a window holds at most one report
 * of a process: a later one goes to the next window that holds none (a
 * last report after _exit or a fatal signal, a report taken late under
 * load, an extra report: the process's later ones then stay one window
 * late). A window is due P/2 (at most 2 s)
 * after its end, and uploaded as [end - P, end), or, when it holds only
 * last reports, as [end - P, latest end of them]: stamped at the heap
 * it describes, inside the processes' lifetime (an exit-only report is
 * found at the exit, not up to P/2 before or after it). A report arriving for a
 * window already uploaded joins the next one: its allocations are
 * counted once, a window later; never a second profile with the same
 * timestamp. In-use values are a gauge: of several reports of one
 * process in a window, only the last one's count. Peaks likewise: the
 * last one of each process, summed over processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "pyro_api.h"
#include "units.h"

uint64_t mpt_cpyro_exit_deadline_ms(void)
{
    const char *v = getenv("MIMPROF_PYROSCOPE_EXIT_DEADLINE");
    uint64_t ms;
    if (v == NULL || !mpt_parse_duration_ms(v, &ms) || ms > MPT_EXIT_DEADLINE_MAX_MS)
        return MPT_EXIT_DEADLINE_MS;
    return ms;
}

#if MPT_HAVE_PYROSCOPE
typedef struct {
    int64_t end; /* the window's end (ns) */
    pid_t pid;
    int64_t to;
    uint8_t *buf;
    size_t len;
    bool peak;
    bool final; /* the process's last report */
} held;

struct mpt_cpyro {
    mpt_pyro_api api;
    mp_pyro_agent *agent;
    int64_t period_ns;
    int64_t done_end; /* the last window uploaded (its end), 0: none */
    held *v;
    size_t n, cap;
    uint64_t unsent; /* reports that could not be merged or queued */
    uint64_t deadline_ms;
    char app[256];
};

mpt_cpyro *mpt_cpyro_start(uint64_t period_ms, char *why, size_t whylen)
{
    mpt_cpyro *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    const char *lib = getenv("MIMPROF_PYROSCOPE_LIB");
    if (!mpt_pyro_open(lib != NULL ? lib : MPT_PYRO_SONAME, false, &p->api, why, whylen)) {
        free(p);
        return NULL;
    }
    mp_pyro_config *cfg = NULL;
    mp_pyro_status st = p->api.config_new(&cfg);
    if (st == MP_PYRO_OK)
        st = p->api.config_from_env(cfg);
    /* The agent's interval is the windows' period: the adapter stamps
     * each window's profile inside it (stamp.h), which a 10 s interval
     * over 250 ms windows cannot (each stamp slid to the next second). */
    if (st == MP_PYRO_OK && period_ms > 0)
        st = p->api.config_set_upload_interval_ms(cfg, (uint32_t)period_ms);
    /* The tree's last reports are uploaded whole: the collector outlives
     * the program, so the program never waits for them, and its stop
     * deadline is the retry budget's, not the 5 s a process would wait
     * at its own exit (a 17-part exit report under load lost 5-6 parts
     * to those 5 s). */
    if (st == MP_PYRO_OK)
        st = p->api.config_set_flush_deadline_ms(cfg, (uint32_t)mpt_cpyro_exit_deadline_ms());
    if (st == MP_PYRO_OK)
        st = p->api.agent_start(cfg, NULL, &p->agent);
    if (st != MP_PYRO_OK) {
        snprintf(why, whylen, "%s", p->api.strerror(st));
        p->api.config_free(cfg);
        mpt_pyro_close(&p->api);
        free(p);
        return NULL;
    }
    p->api.config_free(cfg);
    p->period_ns = (int64_t)(period_ms > 0 ? period_ms : 10000) * 1000000;
    const char *app = getenv("PYROSCOPE_APPLICATION_NAME");
    snprintf(p->app, sizeof p->app, "%s", app != NULL ? app : "");
    const char *dl = getenv("MIMPROF_PYROSCOPE_FLUSH_DEADLINE");
    if (dl == NULL || !mpt_parse_duration_ms(dl, &p->deadline_ms))
        p->deadline_ms = 5000;
    return p;
}

static int64_t grace(const mpt_cpyro *p)
{
    int64_t g = p->period_ns / 2;
    return g < 2000000000 ? g : 2000000000;
}

static void hold(mpt_cpyro *p, pid_t pid, const uint8_t *buf, size_t len, int64_t to, bool peak,
                 bool final)
{
    int64_t end = final ? (to + p->period_ns - 1) / p->period_ns * p->period_ns
                        : (to + p->period_ns / 2) / p->period_ns * p->period_ns;
    if (end <= p->done_end)
        end = p->done_end + p->period_ns; /* late: the next window */
    /* At most one report of a process in a window: a later one (a last
     * report the process could not mark so: _exit, a fatal signal; a
     * boundary report taken late on a loaded machine; an extra report,
     * `mimprof ctl report` or --report-above) goes to the next window
     * that holds none, never in the earlier one's place. After an extra
     * report the process's later reports stay one window late. */
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].pid == pid && p->v[i].peak == peak && p->v[i].end == end && to > p->v[i].to) {
            end += p->period_ns;
            i = (size_t)-1; /* again, in that window */
        }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        held *v = realloc(p->v, cap * sizeof *v);
        if (v == NULL) {
            p->unsent++;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        p->unsent++;
        return;
    }
    memcpy(copy, buf, len);
    p->v[p->n++] = (held){
        .end = end,
        .pid = pid,
        .to = to,
        .buf = copy,
        .len = len,
        .peak = peak,
        .final = final,
    };
}

void mpt_cpyro_add(mpt_cpyro *p, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                   size_t pklen, int64_t from_ns, int64_t to_ns, bool final)
{
    (void)from_ns;
    hold(p, pid, buf, len, to_ns, false, final);
    if (pk != NULL && pklen > 0)
        hold(p, pid, pk, pklen, to_ns, true, final);
}

int64_t mpt_cpyro_due(const mpt_cpyro *p)
{
    int64_t due = 0;
    for (size_t i = 0; i < p->n; i++)
        if (due == 0 || p->v[i].end + grace(p) < due)
            due = p->v[i].end + grace(p);
    return due;
}

/* Whether held entry i is superseded in its window: a later report (or
 * peak) of the same process in the same window. */
static bool superseded(const mpt_cpyro *p, size_t i)
{
    for (size_t j = 0; j < p->n; j++)
        if (j != i && p->v[j].end == p->v[i].end && p->v[j].pid == p->v[i].pid &&
            p->v[j].peak == p->v[i].peak &&
            (p->v[j].to > p->v[i].to || (p->v[j].to == p->v[i].to && j > i)))
            return true;
    return false;
}

/* Where the window ending at `end` is uploaded up to: its end, or the
 * latest end of its reports when they are all last reports. */
static int64_t upload_until(const mpt_cpyro *p, int64_t end)
{
    int64_t until = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->v[i].end != end)
            continue;
        if (!p->v[i].final)
            return end;
        if (p->v[i].to + 1 > until)
            until = p->v[i].to + 1; /* [from, until): the stamp at or before `to` */
    }
    return until > end - p->period_ns && until < end ? until : end;
}

/* Uploads the window ending at `end` (peaks apart) and forgets it. */
static void upload(mpt_cpyro *p, int64_t end)
{
    int64_t until = upload_until(p, end);
    mpt_merge_in *in = calloc(p->n, sizeof *in);
    for (int peak = 0; peak < 2 && in != NULL; peak++) {
        size_t k = 0;
        for (size_t i = 0; i < p->n; i++) {
            if (p->v[i].end != end || p->v[i].peak != (bool)peak)
                continue;
            bool last = !superseded(p, i);
            if (peak && !last)
                continue; /* a process's peak: its last one */
            in[k++] = (mpt_merge_in){.buf = p->v[i].buf, .len = p->v[i].len, .inuse = last};
        }
        if (k == 0)
            continue;
        uint8_t *m;
        size_t mlen;
        mp_pyro_status st = MP_PYRO_E_INVALID_ARGUMENT;
        if (mpt_pprof_merge(in, k, end - p->period_ns, p->period_ns, &m, &mlen) == 0) {
            st = peak ? p->api.agent_submit_as(p->agent, m, mlen, end - p->period_ns, until,
                                               MP_PYRO_PEAK_PREFIX)
                      : p->api.agent_submit(p->agent, m, mlen, end - p->period_ns, until);
            free(m);
        }
        if (st != MP_PYRO_OK)
            p->unsent++;
    }
    free(in);
    size_t o = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (p->v[i].end == end)
            free(p->v[i].buf);
        else
            p->v[o++] = p->v[i];
    }
    p->n = o;
    if (end > p->done_end)
        p->done_end = end;
}

void mpt_cpyro_flush(mpt_cpyro *p, int64_t now_ns, bool all)
{
    for (;;) {
        int64_t end = 0;
        for (size_t i = 0; i < p->n; i++)
            if (end == 0 || p->v[i].end < end)
                end = p->v[i].end;
        if (end == 0 || (!all && end + grace(p) > now_ns))
            return;
        upload(p, end);
    }
}

uint64_t mpt_cpyro_settle(mpt_cpyro *p, uint64_t ms)
{
    mp_pyro_stats st;
    memset(&st, 0, sizeof st);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    int64_t until = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000 + (int64_t)ms;
    for (;;) {
        p->api.agent_stats(p->agent, &st);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (st.queue_depth == 0 || (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000 >= until)
            return st.queue_depth;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
}

void mpt_cpyro_summary(mpt_cpyro *p, bool stop, bool always, char *line, size_t cap)
{
    const mpt_pyro_api *api = &p->api;
    mp_pyro_stats st;
    memset(&st, 0, sizeof st);
    if (stop)
        api->agent_stop(p->agent);
    else /* what is queued, delivered (or given up) within the deadline */
        (void)mpt_cpyro_settle(p, p->deadline_ms);
    api->agent_stats(p->agent, &st);
    char last[400] = "";
    api->agent_last_error(p->agent, last, sizeof last);
    /* The runtime's line (rt_pyro.c), with the collector's pid: one line
     * for the whole process tree. */
    mpt_pyro_summary(&st, p->unsent, last, p->app, always, line, cap);
}

void mpt_cpyro_free(mpt_cpyro *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].buf);
    free(p->v);
    p->api.agent_free(p->agent);
    mpt_pyro_close(&p->api);
    free(p);
}
#else
mpt_cpyro *mpt_cpyro_start(uint64_t period_ms, char *why, size_t whylen)
{
    (void)period_ms;
    snprintf(why, whylen, "built without Pyroscope support");
    return NULL;
}
void mpt_cpyro_add(mpt_cpyro *p, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                   size_t pklen, int64_t from_ns, int64_t to_ns, bool final)
{
    (void)p, (void)pid, (void)buf, (void)len, (void)pk, (void)pklen, (void)from_ns, (void)to_ns;
    (void) final;
}
int64_t mpt_cpyro_due(const mpt_cpyro *p)
{
    (void)p;
    return 0;
}
void mpt_cpyro_flush(mpt_cpyro *p, int64_t now_ns, bool all) { (void)p, (void)now_ns, (void)all; }
void mpt_cpyro_summary(mpt_cpyro *p, bool stop, bool always, char *line, size_t cap)
{
    (void)p, (void)stop, (void)always;
    if (cap > 0)
        line[0] = '\0';
}
void mpt_cpyro_free(mpt_cpyro *p) { (void)p; }
#endif
