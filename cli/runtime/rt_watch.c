/* SPDX-License-Identifier: MIT */
/* The memory watch of the preload runtime (rt_watch.h) on the library's
 * (mp_prof_watch_new): MIMPROF_REPORT_ABOVE read and checked, one watch
 * per process, and the sentence a report carries. */
#define _GNU_SOURCE
#include "rt_watch.h"

#include <stdio.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "rt_common.h"
#include "rt_env.h"
#include "units.h"

static struct {
    bool configured; /* a threshold is set and usable */
    uint64_t bytes;  /* as given: a size ... */
    unsigned pct;    /* ... or a percentage of the cgroup limit */
    mp_prof_watch *watch;
    pid_t pid; /* the process that made watch */
} w;

int mpt_watch_configure(bool quiet, bool every)
{
    const mpt_env_value *v = mpt_env(MPT_ENV_REPORT_ABOVE);
    if (!v->set)
        return 0;
    if (!mpt_parse_threshold(v->text, &w.bytes, &w.pct))
        return -1; /* rt_env.c already refused it */
    if (!every) {
        mpt_rt_say(quiet, "mimprof: MIMPROF_REPORT_ABOVE needs MIMPROF_EVERY (mimprof run sets "
                          "it); not watching the memory\n");
        return 0;
    }
    if (w.pct != 0)
        w.bytes = 0;
    mp_prof_status st = mp_prof_watch_new(w.bytes, w.pct, &w.watch);
    if (st == MP_PROF_E_UNSUPPORTED) {
        mpt_rt_say(quiet,
                   "mimprof: --report-above %s: no cgroup v2 memory.max or memory.high "
                   "limits this process; not watching the memory\n",
                   v->text);
        return 0;
    }
    if (st != MP_PROF_OK) {
        mpt_rt_say(quiet, "mimprof: --report-above %s: %s; not watching the memory\n", v->text,
                   mp_prof_strerror(st));
        return 0;
    }
    w.pid = getpid();
    w.configured = true;
    return 0;
}

void mpt_watch_start(void)
{
    if (!w.configured || w.pid == getpid())
        return;
    /* A fork child: the parent's watch read the parent's /proc/self. */
    mp_prof_watch_free(w.watch);
    w.watch = NULL;
    if (mp_prof_watch_new(w.bytes, w.pct, &w.watch) != MP_PROF_OK)
        w.watch = NULL;
    w.pid = getpid();
}

bool mpt_watch_on(void) { return w.configured && w.watch != NULL && w.pid == getpid(); }

static void mib(char *buf, size_t len, uint64_t b)
{
    snprintf(buf, len, "%.1f MiB", (double)b / 1048576.0);
}

bool mpt_watch_check(char *why, size_t len)
{
    mp_prof_watch_event ev;
    if (!mpt_watch_on() || !mp_prof_watch_check(w.watch, &ev))
        return false;
    char now[32], thr[32], at[32], nxt[32], lim[32];
    mib(now, sizeof now, ev.memory);
    mib(thr, sizeof thr, ev.threshold);
    mib(at, sizeof at, ev.crossed);
    mib(nxt, sizeof nxt, ev.next);
    if (ev.cgroup) {
        mib(lim, sizeof lim, ev.limit);
        snprintf(why, len,
                 "report-above: written because the cgroup's memory.current (%s) crossed %s "
                 "(--report-above %u%% of its limit %s = %s; the next report at %s)",
                 now, at, ev.percent, lim, thr, nxt);
    } else {
        snprintf(why, len,
                 "report-above: written because the RSS (%s) crossed %s (--report-above %s; "
                 "the next report at %s)",
                 now, at, thr, nxt);
    }
    return true;
}
