/* SPDX-License-Identifier: MIT */
/* The preload runtime's bridge to the Pyroscope adapter: loads
 * libmimprof-pyroscope (dlopen: a process that does not upload never
 * pays for libcurl), keeps the agents' configuration, starts this
 * process's agent at its first report, hands it every report, and at the
 * end stops it and says what was lost (rt_pyro.h).
 *
 * Threads: called with the runtime's lock held (setup, after fork) or by
 * the one thread that takes reports (submit, finish).
 */
#define _GNU_SOURCE
#include "rt_pyro.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pyro_api.h"
#include "rt_common.h"
#include "rt_env.h"

static struct {
    bool quiet;
    bool on;               /* configured: upload every report */
    bool failed;           /* the agent could not start: reports go nowhere */
    bool summary;          /* a line at exit even when nothing was lost */
    bool forked;           /* this process is a forked child of the configured one */
    uint64_t unsent;       /* reports never handed to the agent */
    char app[128];         /* service_name, for the summary line */
    char status_dir[4096]; /* MIMPROF_STATUS_DIR: where the summary goes, or "" */
#if MPT_HAVE_PYROSCOPE
    mpt_pyro_api api;
    mp_pyro_config *cfg;  /* validated at start; copied by each agent */
    mp_pyro_agent *agent; /* started at the first report */
#endif
} pyro;

#define say(...) mpt_rt_say(pyro.quiet, __VA_ARGS__)

bool mpt_rt_pyro_on(void) { return pyro.on; }

void mpt_rt_pyro_set_status_dir(const char *dir)
{
    snprintf(pyro.status_dir, sizeof pyro.status_dir, "%s", dir != NULL ? dir : "");
}

#if MPT_HAVE_PYROSCOPE
/* Loads libmimprof-pyroscope: $MIMPROF_PYROSCOPE_LIB (mimprof run sets
 * it to the file it validated the flags with), else the file next to this
 * preload object (an install prefix's libdir), else the dynamic loader's
 * search (LD_LIBRARY_PATH, ld.so.cache, this object's RUNPATH). */
static bool load(char *err, size_t errlen)
{
    mpt_rt_fds_take_libcurl();
    const char *lib = mpt_env(MPT_ENV_PYROSCOPE_LIB)->text;
    if (lib != NULL)
        return mpt_pyro_open(lib, false, &pyro.api, err, errlen);
    Dl_info info;
    if (dladdr(&pyro, &info) != 0 && info.dli_fname != NULL &&
        strrchr(info.dli_fname, '/') != NULL) {
        char cand[4200];
        int dlen = (int)(strrchr(info.dli_fname, '/') - info.dli_fname);
        snprintf(cand, sizeof cand, "%.*s/%s", dlen, info.dli_fname, MPT_PYRO_SONAME);
        if (access(cand, R_OK) == 0)
            return mpt_pyro_open(cand, false, &pyro.api, err, errlen);
    }
    return mpt_pyro_open(MPT_PYRO_SONAME, false, &pyro.api, err, errlen);
}
#endif

/* PYROSCOPE_SERVER_ADDRESS is set: loads the adapter and builds, checks and
 * keeps the agents' configuration (PYROSCOPE_*, MIMPROF_PYROSCOPE_*, read
 * by mp_pyro_config_from_env). rt.lock held, at start, before the
 * runtime's variables are removed. 1: uploading; -1: not (said why). */
int mpt_rt_pyro_setup(bool quiet)
{
    pyro.quiet = quiet;
#if MPT_HAVE_PYROSCOPE
    char err[600];
    if (!load(err, sizeof err)) {
        say("mimprof: pyroscope: cannot load libmimprof-pyroscope: %s; not uploading\n", err);
        return -1;
    }
    const mpt_pyro_api *api = &pyro.api;
    mp_pyro_config *cfg = NULL;
    mp_pyro_status st = api->config_new(&cfg);
    if (st == MP_PYRO_OK)
        st = api->config_from_env(cfg);
    if (st == MP_PYRO_OK && pyro.quiet && !mpt_env(MPT_ENV_PYROSCOPE_LOG_LEVEL)->set)
        st = api->config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    if (st == MP_PYRO_OK)
        st = api->config_validate(cfg);
    if (st != MP_PYRO_OK) {
        const char *why = cfg != NULL ? api->config_error(cfg) : "";
        if (st == MP_PYRO_E_NOT_CONFIGURED && !mpt_env(MPT_ENV_PYRO_APP)->set)
            why = "PYROSCOPE_APPLICATION_NAME is not set";
        say("mimprof: pyroscope: %s; not uploading\n",
            why != NULL && why[0] != '\0' ? why : api->strerror(st));
        api->config_free(cfg);
        mpt_pyro_close(&pyro.api);
        return -1;
    }
    pyro.cfg = cfg;
    snprintf(pyro.app, sizeof pyro.app, "%s", mpt_env(MPT_ENV_PYRO_APP)->text);
    pyro.summary = mpt_env_flag(MPT_ENV_PYROSCOPE_SUMMARY, false);
    pyro.on = true;
    return 1;
#else
    say("mimprof: PYROSCOPE_SERVER_ADDRESS is set, but this preload was built without "
        "Pyroscope support (no <mimprof/pyroscope.h>); not uploading\n");
    return -1;
#endif
}

#if MPT_HAVE_PYROSCOPE
/* Starts this process's sink agent (at its first report, so that a child
 * that only forks and executes never starts one). Its threads are created
 * with every signal blocked: signals stay with the program's threads. */
static void start_agent(void)
{
    const mpt_pyro_api *api = &pyro.api;
    mp_pyro_status st = MP_PYRO_OK;
    if (pyro.forked) /* the parent holds the spool directory's lock */
        st = api->config_set_spool(pyro.cfg, NULL, 0, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (st == MP_PYRO_OK)
        st = api->agent_start(pyro.cfg, NULL, &pyro.agent);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != MP_PYRO_OK) {
        pyro.agent = NULL;
        pyro.failed = true;
        say("mimprof: pyroscope: not uploading from pid %ld: %s\n", (long)getpid(),
            api->strerror(st));
    }
}
#endif

/* Hands one report to the agent (copied and gzipped there; the upload runs
 * on the agent's thread and never blocks this one). */
void mpt_rt_pyro_submit(const uint8_t *buf, size_t len, int64_t from_ns, int64_t until_ns,
                        bool peak)
{
#if MPT_HAVE_PYROSCOPE
    if (pyro.agent == NULL && !pyro.failed)
        start_agent();
    if (pyro.agent != NULL &&
        (peak ? pyro.api.agent_submit_as(pyro.agent, buf, len, from_ns, until_ns,
                                         MP_PYRO_PEAK_PREFIX)
              : pyro.api.agent_submit(pyro.agent, buf, len, from_ns, until_ns)) == MP_PYRO_OK)
        return;
    if (len > 0)
        pyro.unsent++;
#else
    (void)buf;
    (void)len;
    (void)from_ns;
    (void)until_ns;
    (void)peak;
#endif
}

/* The upload summary of this process: a file in the private directory
 * `mimprof run` made for it (MIMPROF_STATUS_DIR), which the command prints
 * after the program ended -- whatever the program did with its
 * descriptors, nothing is lost silently -- else (a bare preload, or the
 * directory is gone) a message on the runtime's own descriptor. */
#define status_say(...) mpt_rt_say_to(pyro.quiet, status_path(), __VA_ARGS__)

/* pyroscope.<pid> in pyro.status_dir, or NULL. */
static const char *status_path(void)
{
    static char path[4200];
    if (pyro.status_dir[0] == '\0')
        return NULL;
    snprintf(path, sizeof path, "%s/pyroscope.%ld", pyro.status_dir, (long)getpid());
    return path;
}

/* After the last report: stops the agent, which delivers what is queued
 * within its flush deadline (MIMPROF_PYROSCOPE_FLUSH_DEADLINE, default 5 s)
 * and spools or counts the rest; then one line on stderr when anything was
 * lost, spooled or failed on the way (or, when `mimprof run` asked for it,
 * that everything was uploaded). No more uploads from this process. */
void mpt_rt_pyro_finish(void)
{
#if MPT_HAVE_PYROSCOPE
    if (!pyro.on)
        return;
    pyro.on = false;
    const mpt_pyro_api *api = &pyro.api;
    mp_pyro_stats st;
    memset(&st, 0, sizeof st);
    char last[400] = "";
    if (pyro.agent != NULL) {
        api->agent_stop(pyro.agent);
        api->agent_stats(pyro.agent, &st);
        api->agent_last_error(pyro.agent, last, sizeof last);
        api->agent_free(pyro.agent);
        pyro.agent = NULL;
    }
    char line[1024]; /* what status_say() holds: the line cut where it was */
    if (mpt_pyro_summary(&st, pyro.unsent, last, pyro.app, pyro.summary && !pyro.forked, line,
                         sizeof line))
        status_say("%s", line);
#endif
}

/* In a forked child: the parent's agent is forgotten, not stopped (its
 * threads do not exist here and its lock may be held); the child starts
 * its own at its first report. */
const char *mpt_rt_pyro_progress(uint64_t *uploaded, uint64_t *lost)
{
    *uploaded = *lost = 0;
#if MPT_HAVE_PYROSCOPE
    if (pyro.agent != NULL) {
        mp_pyro_stats st;
        memset(&st, 0, sizeof st);
        pyro.api.agent_stats(pyro.agent, &st);
        *uploaded = st.uploaded;
        *lost = st.dropped_queue_full + st.dropped_rejected + st.dropped_retry_exhausted +
                st.dropped_stop_deadline + st.dropped_spool_io + st.reports_failed;
    }
#endif
    return pyro.on ? pyro.app : "";
}

void mpt_rt_pyro_after_fork(void)
{
#if MPT_HAVE_PYROSCOPE
    pyro.agent = NULL;
#endif
    pyro.failed = false;
    pyro.unsent = 0;
    pyro.forked = true;
}
