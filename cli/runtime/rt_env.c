/* SPDX-License-Identifier: MIT */
/* The runtime's environment variables: one table, read once (rt_env.h). */
#define _GNU_SOURCE
#include "rt_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "units.h"

extern char **environ;

/* The documentation table of cli/README.md is checked against this
 * one (tool-env): a variable added here must be documented there. */
const mpt_env_desc mpt_env_table[MPT_ENV_COUNT] = {
    [MPT_ENV_INTERVAL] = {"MIMPROF_INTERVAL", MPT_ENVK_SIZE, "512k",
                          "mean bytes between samples: `4096`, `64k`, `1m`, `64KiB`"},
    [MPT_ENV_EVERY] = {"MIMPROF_EVERY", MPT_ENVK_DURATION, NULL,
                       "report period (`10s`, `500ms`; `0`: at exit and on SIGUSR2); unset: "
                       "one report at exit (the bare preload)"},
    [MPT_ENV_OUTPUT] = {"MIMPROF_OUTPUT", MPT_ENVK_STRING, "mimprof.%p.pb",
                        "a directory (existing, or ending in `/`: created with its parents) or a "
                        "file pattern with `%p`, `%n`, `%t`, `%%`; `mimprof-out/` when "
                        "`MIMPROF_EVERY` is set; none when uploading"},
    [MPT_ENV_SEED] = {"MIMPROF_SEED", MPT_ENVK_U64, "0", "sampling seed (0: random)"},
    [MPT_ENV_STACK_DEPTH] = {"MIMPROF_STACK_DEPTH", MPT_ENVK_DEPTH, "64",
                             "frames kept per stack, 1..512 (`MP_PROF_MAX_STACK_DEPTH`)"},
    [MPT_ENV_SYMBOLIZE] = {"MIMPROF_SYMBOLIZE", MPT_ENVK_SYMBOLIZE, NULL,
                           "`none`, `functions` or `lines`; unset: `functions` (`lines` reads "
                           "DWARF: ~215M instructions at the first report where libc's debug "
                           "info is installed)"},
    [MPT_ENV_DROP_FRAMES] = {"MIMPROF_DROP_FRAMES", MPT_ENVK_STRING, NULL,
                             "more frames to drop from the leaf end of stacks, as the allocator's "
                             "entry points are (`operator new`, `malloc`, ...): a POSIX "
                             "extended regular expression matching whole function names "
                             "(`xmalloc`, `g_malloc.*`)"},
    [MPT_ENV_KEEP_ALLOC_FRAMES] = {"MIMPROF_KEEP_ALLOC_FRAMES", MPT_ENVK_FLAG, "0",
                                   "`1`: drop no frame, not even the allocator's entry points "
                                   "(`MIMPROF_DROP_FRAMES` ignored)"},
    [MPT_ENV_DISABLE] = {"MIMPROF_DISABLE", MPT_ENVK_FLAG, "0",
                         "`1`: the allocator only, no session, no upload"},
    [MPT_ENV_DORMANT] = {"MIMPROF_DORMANT", MPT_ENVK_FLAG, "0",
                         "`1`: configured but not started: the allocator's fast path only, "
                         "until `mimprof ctl PID start`"},
    [MPT_ENV_CTL] = {"MIMPROF_CTL", MPT_ENVK_FLAG, "1",
                     "`0`: no control socket (`mimprof ctl`) in runtime mode"},
    [MPT_ENV_HTTP] = {"MIMPROF_HTTP", MPT_ENVK_STRING, NULL,
                      "`ADDR:PORT` (or `PORT`: 127.0.0.1): serve Go's `/debug/pprof/heap` and "
                      "`/debug/pprof/allocs` there"},
    [MPT_ENV_HTTP_WILDCARD] = {"MIMPROF_HTTP_WILDCARD", MPT_ENVK_FLAG, "0",
                               "`1`: `MIMPROF_HTTP` may be a wildcard address (`0.0.0.0`, `[::]`)"},
    [MPT_ENV_FOLLOW_FORK] = {"MIMPROF_FOLLOW_FORK", MPT_ENVK_FLAG, "1",
                             "forked children profile themselves"},
    [MPT_ENV_FOLLOW_EXEC] = {"MIMPROF_FOLLOW_EXEC", MPT_ENVK_FLAG, "1",
                             "programs a child process executes profile themselves (`mimprof "
                             "run` passes `0` unless `--follow-exec`); needs `MIMPROF_ROOT_PID`"},
    [MPT_ENV_ROOT_PID] = {"MIMPROF_ROOT_PID", MPT_ENVK_PID, NULL,
                          "the profiled process (`mimprof run` sets it): a program that replaces "
                          "it by exec continues its profile; a program executed in another "
                          "process profiles itself only with `MIMPROF_FOLLOW_EXEC=1`"},
    [MPT_ENV_QUIET] = {"MIMPROF_QUIET", MPT_ENVK_FLAG, "0",
                       "`1`: no message but errors (write failures, malformed values)"},
    [MPT_ENV_IMAGE] = {"MIMPROF_IMAGE", MPT_ENVK_STRING, NULL,
                       "directory of heap images (SIGUSR2, periodic, at exit)"},
    [MPT_ENV_IMAGE_EVERY] = {"MIMPROF_IMAGE_EVERY", MPT_ENVK_DURATION, NULL,
                             "heap image period (needs `MIMPROF_IMAGE`)"},
    [MPT_ENV_IMAGE_ON_EXIT] = {"MIMPROF_IMAGE_ON_EXIT", MPT_ENVK_FLAG, "0",
                               "`1`: a heap image at exit (needs `MIMPROF_IMAGE`)"},
    [MPT_ENV_PYROSCOPE_LIB] = {"MIMPROF_PYROSCOPE_LIB", MPT_ENVK_STRING, NULL,
                               "the libmimprof-pyroscope to load (else the one next to the "
                               "preload, else the loader's search)"},
    [MPT_ENV_PYROSCOPE_SUMMARY] = {"MIMPROF_PYROSCOPE_SUMMARY", MPT_ENVK_FLAG, "0",
                                   "`1`: a line at exit also when nothing was lost"},
    [MPT_ENV_PYROSCOPE_LOG_LEVEL] = {"MIMPROF_PYROSCOPE_LOG_LEVEL", MPT_ENVK_STRING, NULL,
                                     "the adapter's log level (`MIMPROF_QUIET=1`: `error`)"},
    [MPT_ENV_STATUS_DIR] = {"MIMPROF_STATUS_DIR", MPT_ENVK_STRING, NULL,
                            "a private directory of `mimprof run`: each process's upload "
                            "summary goes to `pyroscope.<pid>` there, printed by the command"},
    [MPT_ENV_PYRO_SERVER] = {"PYROSCOPE_SERVER_ADDRESS", MPT_ENVK_STRING, NULL,
                             "upload every report there (the adapter reads the other "
                             "`PYROSCOPE_*`)"},
    [MPT_ENV_PYRO_APP] = {"PYROSCOPE_APPLICATION_NAME", MPT_ENVK_STRING, NULL,
                          "the service name (required to upload)"},
    [MPT_ENV_PYRO_UPLOAD_INTERVAL] = {"PYROSCOPE_UPLOAD_INTERVAL", MPT_ENVK_DURATION, "10s",
                                      "the report period of a bare preload that uploads"},
    [MPT_ENV_REPORT_ABOVE] = {"MIMPROF_REPORT_ABOVE", MPT_ENVK_THRESHOLD, NULL,
                              "a report (and a heap image with `MIMPROF_IMAGE`) at once when the "
                              "RSS crosses SIZE (`100m`), or the cgroup's memory N% of its "
                              "`memory.max`/`memory.high` (`90%`), and at each further tenth of "
                              "it (needs `MIMPROF_EVERY`)"},
    [MPT_ENV_COLLECTOR] = {"MIMPROF_COLLECTOR", MPT_ENVK_STRING, NULL,
                           "`NAME:TOKEN`, set by `mimprof run`: the abstract socket name of its "
                           "collector (which writes the reports of the whole process tree) and "
                           "the token its packets carry"},
    [MPT_ENV_COLLECTOR_SYMBOLIZE] = {"MIMPROF_COLLECTOR_SYMBOLIZE", MPT_ENVK_SYMBOLIZE, NULL,
                                     "set by `mimprof run` when its collector names the "
                                     "reports (`MIMPROF_SYMBOLIZE=none`): how a process names "
                                     "the reports it writes itself when the collector does not "
                                     "take them (gone, stopped, its queue full)"},
};

/* Room for every value the runtime keeps (paths are the long ones). */
static char g_arena[7 * 4096 + 1024];
static mpt_env_value g_val[MPT_ENV_COUNT];

static const char *expected(mpt_env_kind k)
{
    switch (k) {
    case MPT_ENVK_SIZE:
        return "a size (e.g. 512k, 1m)";
    case MPT_ENVK_DURATION:
        return "a duration (e.g. 10s, 500ms, 0)";
    case MPT_ENVK_U64:
        return "a number";
    case MPT_ENVK_DEPTH:
        return "in 1..512";
    case MPT_ENVK_SYMBOLIZE:
        return "none|functions|lines";
    case MPT_ENVK_PID:
        return "a process id";
    case MPT_ENVK_THRESHOLD:
        return "a size (e.g. 100m) or a percentage (e.g. 90%)";
    default:
        return "usable";
    }
}

static bool parse_u64(const char *s, int base, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return false;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse(mpt_env_kind k, const char *s, uint64_t *out)
{
    switch (k) {
    case MPT_ENVK_STRING:
        return true;
    case MPT_ENVK_SIZE:
        return mpt_parse_size(s, out) && *out > 0 && *out <= MP_PROF_MAX_INTERVAL;
    case MPT_ENVK_DURATION:
        return mpt_parse_duration_ms(s, out);
    case MPT_ENVK_U64:
        return parse_u64(s, 0, out);
    case MPT_ENVK_DEPTH:
        return parse_u64(s, 10, out) && *out >= 1 && *out <= MP_PROF_MAX_STACK_DEPTH;
    case MPT_ENVK_PID:
        return parse_u64(s, 10, out) && *out > 0 && *out <= INT32_MAX;
    case MPT_ENVK_THRESHOLD: {
        unsigned pct;
        return mpt_parse_threshold(s, out, &pct);
    }
    case MPT_ENVK_FLAG:
        *out = !(strcmp(s, "0") == 0 || strcmp(s, "no") == 0 || strcmp(s, "false") == 0);
        return true;
    case MPT_ENVK_SYMBOLIZE:
        if (strcmp(s, "none") == 0)
            *out = MP_PROF_SYMBOLIZE_NONE;
        else if (strcmp(s, "functions") == 0)
            *out = MP_PROF_SYMBOLIZE_FUNCTIONS;
        else if (strcmp(s, "lines") == 0)
            *out = MP_PROF_SYMBOLIZE_LINES;
        else
            return false;
        return true;
    }
    return false;
}

mpt_env_var mpt_env_load(char *const *envp, const char **why)
{
    if (envp == NULL)
        envp = environ;
    size_t used = 0;
    mpt_env_var bad = MPT_ENV_COUNT;
    memset(g_val, 0, sizeof g_val);
    for (char *const *e = envp; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL || eq[1] == '\0')
            continue;
        size_t nlen = (size_t)(eq - *e);
        for (int v = 0; v < MPT_ENV_COUNT; v++) {
            const mpt_env_desc *d = &mpt_env_table[v];
            if (g_val[v].set || strlen(d->name) != nlen || memcmp(*e, d->name, nlen) != 0)
                continue;
            size_t len = strlen(eq + 1);
            if (used + len + 1 > sizeof g_arena) {
                if (bad == MPT_ENV_COUNT) {
                    bad = (mpt_env_var)v;
                    *why = "short enough";
                }
                break;
            }
            char *copy = memcpy(g_arena + used, eq + 1, len + 1);
            used += len + 1;
            g_val[v].set = true;
            g_val[v].text = copy;
            if (!parse(d->kind, copy, &g_val[v].num) && bad == MPT_ENV_COUNT) {
                bad = (mpt_env_var)v;
                *why = expected(d->kind);
            }
            break;
        }
    }
    return bad;
}

const mpt_env_value *mpt_env(mpt_env_var v) { return &g_val[v]; }

bool mpt_env_flag(mpt_env_var v, bool dflt) { return g_val[v].set ? g_val[v].num != 0 : dflt; }
