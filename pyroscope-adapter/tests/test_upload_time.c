/* SPDX-License-Identifier: MIT */
/* Nothing overwritten, time as it was: Pyroscope keeps one profile per
 * series, profile type and millisecond, so
 *  - a parent and its forked child reporting the same series with windows
 *    on the same boundaries, and
 *  - the parts of a report split to fit the server's limits (196,608
 *    stacks)
 * must each land on a millisecond of their own; and a window's query
 * [start, end) returns exactly its report, an instant query just before
 * the window's end exactly the live values reported then. Against the
 * real server of MIMPROF_PYROSCOPE_URL (`./dev test` starts one), else
 * the stand-in (which keeps one profile per millisecond as they do). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define ALLOC_SPACE   "memory:alloc_space:bytes:space:bytes"
#define ALLOC_OBJECTS "memory:alloc_objects:count:space:bytes"
#define INUSE_SPACE   "memory:inuse_space:bytes:space:bytes"
#define INUSE_OBJECTS "memory:inuse_objects:count:space:bytes"
#define WAIT_MS       60000 /* for the server to show what it acknowledged */

TestSuite(upload_time, .timeout = 240);

/* --- a parent and its forked child ------------------------------------------ */

#define EVERY_MS 1000
#define SPREAD   (EVERY_MS / 2) /* the stamps of a window lie in its last SPREAD ms */

typedef struct proc_run {
    int ok; /* the agent started, stopped and delivered everything */
    int nwin;
    mp_pyro_window win[16];
    int64_t alloc[16], inuse[16]; /* alloc_space, inuse_space of report k */
    int64_t sum_alloc;
} proc_run;

/* One process's agent with the fixed backend for `ms`; no Criterion
 * assertion (it runs in the child too). */
static void run_agent(const char *url, const char *app, mp_pyro_protocol proto, int ms,
                      proc_run *out)
{
    memset(out, 0, sizeof *out);
    mp_pyro_config *cfg;
    if (mp_pyro_config_new(&cfg) != MP_PYRO_OK)
        return;
    mp_pyro_config_set_server(cfg, url);
    mp_pyro_config_set_app_name(cfg, app);
    mp_pyro_config_add_tags(cfg, "env=ci");
    mp_pyro_config_set_protocol(cfg, proto);
    mp_pyro_config_set_upload_interval_ms(cfg, EVERY_MS);
    mp_pyro_config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    fixed_backend *fb;
    mp_pyro_backend *be = fixed_backend_new(&fb);
    mp_pyro_agent *a;
    if (be && mp_pyro_agent_start(cfg, be, &a) == MP_PYRO_OK) {
        sleep_ms(ms);
        mp_pyro_status s = mp_pyro_agent_stop(a);
        mp_pyro_stats st;
        mp_pyro_agent_stats(a, &st);
        mp_pyro_agent_free(a);
        out->ok = s == MP_PYRO_OK && st.uploaded == st.reports_queued && st.uploaded > 0;
        pthread_mutex_lock(&fb->mu);
        out->nwin = fb->nwindows < 16 ? fb->nwindows : 16;
        for (int k = 0; k < out->nwin; k++) {
            tp_heap_values v;
            fixed_values(k, &v);
            out->win[k] = fb->windows[k];
            out->alloc[k] = v.alloc_space[0] + v.alloc_space[1];
            out->inuse[k] = v.inuse_space[0] + v.inuse_space[1];
        }
        out->sum_alloc = fb->sum_alloc_space;
        pthread_mutex_unlock(&fb->mu);
    }
    mp_pyro_backend_free(be);
    mp_pyro_config_free(cfg);
}

/* The report of `r` whose window ends at `until_ns`, or -1. */
static int window_ending(const proc_run *r, int64_t until_ns)
{
    for (int k = 0; k < r->nwin; k++)
        if (r->win[k].until_nanos == until_ns)
            return k;
    return -1;
}

static void parent_and_child(mp_pyro_protocol proto)
{
    ts_server s;
    if (!ts_start_any(&s, NULL))
        cr_skip_test("no server: stand-in not available and MIMPROF_PYROSCOPE_URL unset");
    char app[128], sel[200];
    snprintf(app, sizeof app, "mimprof-ut.fork.%s.%d.%" PRId64,
             proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest", (int)getpid(), now_ms());
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    int64_t t0 = now_ms();
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        close(fd[0]);
        proc_run r;
        run_agent(s.url, app, proto, 3300, &r);
        _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    proc_run mine, theirs;
    run_agent(s.url, app, proto, 3300, &mine);
    ssize_t got = read(fd[0], &theirs, sizeof theirs);
    close(fd[0]);
    int status = 0;
    waitpid(child, &status, 0);
    cr_assert_eq(got, (ssize_t)sizeof theirs);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert(mine.ok && theirs.ok, "both processes delivered every report");

    /* everything either process sent, in the server's totals */
    int64_t want = mine.sum_alloc + theirs.sum_alloc;
    int64_t total = q_merge_total_wait(s.url, NULL, ALLOC_SPACE, sel, t0 - 60000, now_ms() + 60000,
                                       want, WAIT_MS);
    cr_expect_eq(total, want,
                 "alloc_space: the server holds %" PRId64 " of the %" PRId64
                 " bytes the parent and its child sent",
                 total, want);

    /* each full window both processes reported: [start, end) holds exactly
     * their two reports, the instant before its end their live values */
    int windows = 0;
    for (int k = 1; k < mine.nwin; k++) {
        const mp_pyro_window w = mine.win[k];
        int j = window_ending(&theirs, w.until_nanos);
        if (j < 0 || theirs.win[j].from_nanos != w.from_nanos ||
            w.until_nanos % ((int64_t)EVERY_MS * 1000000) != 0)
            continue; /* not a full common window (the first, or the stop's) */
        windows++;
        int64_t from_ms = w.from_nanos / 1000000, until_ms = w.until_nanos / 1000000;
        int64_t a = mine.alloc[k] + theirs.alloc[j];
        int64_t got_a =
            q_merge_total_wait(s.url, NULL, ALLOC_SPACE, sel, from_ms, until_ms - 1, a, WAIT_MS);
        cr_expect_eq(got_a, a,
                     "window %" PRId64 "..%" PRId64 " ms: alloc_space %" PRId64
                     ", the two reports %" PRId64,
                     from_ms, until_ms, got_a, a);
        int64_t i = mine.inuse[k] + theirs.inuse[j];
        int64_t got_i = q_merge_total_wait(s.url, NULL, INUSE_SPACE, sel, until_ms - SPREAD,
                                           until_ms - 1, i, WAIT_MS);
        cr_expect_eq(got_i, i, "instant %" PRId64 " ms: inuse_space %" PRId64 ", reported %" PRId64,
                     until_ms, got_i, i);
    }
    cr_expect_geq(windows, 1, "the two processes shared a full window");
    ts_stop(&s);
}

Test(upload_time, parent_and_forked_child_both_kept_ingest)
{
    parent_and_child(MP_PYRO_PROTOCOL_INGEST);
}
Test(upload_time, parent_and_forked_child_both_kept_push)
{
    parent_and_child(MP_PYRO_PROTOCOL_PUSH);
}

/* --- a report over the limits ------------------------------------------------- */

#define WIDE_BITS  18
#define WIDE_N     196608 /* 3 x 65,536 stacks: 13 parts of at most 16,000 samples */
#define WIDE_BYTES 4096
/* The stand-in (Python) takes a minute per protocol for 196,608 stacks:
 * it gets 65,536 (5 parts), which shows its one-per-millisecond rule as
 * well; the real server gets the whole report. */
#define STANDIN_N 65536

static void split_report(mp_pyro_protocol proto)
{
    ts_server s;
    if (!ts_start_any(&s, NULL))
        cr_skip_test("no server: stand-in not available and MIMPROF_PYROSCOPE_URL unset");
    char app[128], sel[200];
    snprintf(app, sizeof app, "mimprof-ut.wide.%s.%d.%" PRId64,
             proto == MP_PYRO_PROTOCOL_PUSH ? "push" : "ingest", (int)getpid(), now_ms());
    snprintf(sel, sizeof sel, "{service_name=\"%s\"}", app);
    mp_pyro_config *cfg;
    cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_server(cfg, s.url), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_set_app_name(cfg, app), MP_PYRO_OK);
    mp_pyro_config_set_protocol(cfg, proto);
    mp_pyro_config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    /* 13 parts of up to 2 MiB meet the server's 4 MB/s: retried until in */
    mp_pyro_retry_policy p = {
        .max_attempts = 40, .initial_backoff_ms = 200, .max_backoff_ms = 2000, .budget_ms = 120000};
    mp_pyro_config_set_retry(cfg, &p);
    mp_pyro_config_set_flush_deadline_ms(cfg, 180000);
    /* the last whole 10 s window (the default interval) */
    const int64_t every = 10000;
    int64_t until_ms = now_ms() / every * every, from_ms = until_ms - every;
    const int64_t n = s.external ? WIDE_N : STANDIN_N;
    size_t len;
    uint8_t *pprof = tp_build_wide_n(WIDE_BITS, (uint64_t)n, WIDE_BYTES, from_ms * 1000000, &len);
    mp_pyro_agent *a;
    cr_assert_eq(mp_pyro_agent_start(cfg, NULL, &a), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_agent_submit(a, pprof, len, from_ms * 1000000, until_ms * 1000000),
                 MP_PYRO_OK);
    free(pprof);
    cr_expect_eq(mp_pyro_agent_stop(a), MP_PYRO_OK);
    mp_pyro_stats st;
    mp_pyro_agent_stats(a, &st);
    mp_pyro_agent_free(a);
    cr_expect_geq(st.parts_split, (uint64_t)(n / 16000), "%lld stacks in at least %lld requests",
                  (long long)n, (long long)(n / 16000 + 1));
    cr_expect_eq(st.uploaded, st.reports_queued, "delivered %llu of %llu",
                 (unsigned long long)st.uploaded, (unsigned long long)st.reports_queued);

    const struct {
        const char *type;
        int64_t want;
    } types[] = {{INUSE_SPACE, n * WIDE_BYTES},
                 {INUSE_OBJECTS, n},
                 {ALLOC_SPACE, n * WIDE_BYTES},
                 {ALLOC_OBJECTS, n}};
    for (size_t i = 0; i < 4; i++) {
        /* the window [start, end): every part, once */
        int64_t got = q_merge_total_wait(s.url, NULL, types[i].type, sel, from_ms, until_ms - 1,
                                         types[i].want, WAIT_MS);
        cr_expect_eq(got, types[i].want, "%s: %" PRId64 " of %" PRId64, types[i].type, got,
                     types[i].want);
    }
    /* the live values at the window's end (the last second before it) */
    int64_t live = q_merge_total_wait(s.url, NULL, INUSE_SPACE, sel, until_ms - 1000, until_ms - 1,
                                      types[0].want, WAIT_MS);
    cr_expect_eq(live, types[0].want, "instant inuse_space");
    /* and nothing of it in the neighbouring windows */
    cr_expect_eq(
        q_merge_total_wait(s.url, NULL, ALLOC_SPACE, sel, until_ms, until_ms + every - 1, 0, 0), 0);
    cr_expect_eq(
        q_merge_total_wait(s.url, NULL, ALLOC_SPACE, sel, from_ms - every, from_ms - 1, 0, 0), 0);
    mp_pyro_config_free(cfg);
    ts_stop(&s);
}

Test(upload_time, split_report_every_part_kept_ingest, .timeout = 300)
{
    split_report(MP_PYRO_PROTOCOL_INGEST);
}
Test(upload_time, split_report_every_part_kept_push, .timeout = 300)
{
    split_report(MP_PYRO_PROTOCOL_PUSH);
}
