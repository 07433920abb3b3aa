/* SPDX-License-Identifier: MIT */
/* The memory watch (rt_watch.h): the threshold, its steps, and reading
 * RSS or the cgroup's memory with one pread() of a descriptor kept open.
 * No stdio, no allocation: it runs in the preload's constructor and on
 * the reporter thread. */
#define _GNU_SOURCE
#include "rt_watch.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_common.h"
#include "rt_env.h"
#include "rt_owned.h"
#include "units.h"

static struct {
    bool configured;    /* a threshold is set and usable */
    bool cgroup;        /* memory = the cgroup's memory.current, else RSS */
    unsigned pct;       /* the percentage given, 0 for a size */
    uint64_t threshold; /* T, bytes */
    uint64_t limit;     /* the cgroup limit the percentage is of */
    uint64_t next;      /* the next report at this many bytes */
    char usage[4096];   /* the cgroup's memory.current */
    mpt_owned fd;       /* the descriptor read (rt_owned.h), -1 until mpt_watch_start */
    pid_t pid;          /* the process that opened fd */
    long page;
} w = {.fd = {.fd = -1}};

/* Reads the whole (small) file into buf, NUL-terminated. Length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* A limit file's value: a number, or "max" (none: false). */
static bool read_limit(const char *path, uint64_t *out)
{
    char buf[64];
    if (slurp(path, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
        return false;
    *out = strtoull(buf, NULL, 10);
    return *out > 0;
}

int mpt_watch_cgroup_limit(const char *mount, const char *cgroup, uint64_t *limit, char *usage,
                           size_t cap)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s%s", mount, strcmp(cgroup, "/") == 0 ? "" : cgroup) >=
        (int)sizeof dir)
        return -1;
    size_t root = strlen(mount);
    bool found = false;
    for (;;) {
        static const char *const files[] = {"memory.high", "memory.max"};
        for (int i = 0; i < 2; i++) {
            char path[4200];
            uint64_t v;
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (read_limit(path, &v) && (!found || v < *limit)) {
                *limit = v;
                found = snprintf(usage, cap, "%s/memory.current", dir) < (int)cap;
            }
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (size_t)(slash - dir) < root)
            break;
        *slash = '\0';
    }
    return found ? 0 : -1;
}

/* The cgroup2 mount point (/proc/self/mountinfo: field 5 of the line
 * whose file system type, after " - ", is cgroup2). */
static bool cgroup2_mount(char *out, size_t cap)
{
    char buf[65536];
    if (slurp("/proc/self/mountinfo", buf, sizeof buf) <= 0)
        return false;
    for (char *line = buf; *line != '\0';) {
        char *end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        const char *dash = strstr(line, " - cgroup2 ");
        if (dash != NULL) {
            const char *f = line;
            for (int i = 0; i < 4 && f != NULL; i++) { /* skip id, parent, dev, root */
                f = strchr(f, ' ');
                if (f != NULL)
                    f++;
            }
            const char *sp = f != NULL ? strchr(f, ' ') : NULL;
            if (sp != NULL && (size_t)(sp - f) < cap) {
                memcpy(out, f, (size_t)(sp - f));
                out[sp - f] = '\0';
                return true;
            }
        }
        if (end == NULL)
            break;
        line = end + 1;
    }
    return false;
}

/* The process's cgroup v2 path (the "0::" line of /proc/self/cgroup). */
static bool own_cgroup(char *out, size_t cap)
{
    char buf[8192];
    if (slurp("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return false;
    for (char *line = buf; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        if (strncmp(line, "0::", 3) == 0 && strlen(line + 3) < cap) {
            strcpy(out, line + 3);
            return true;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return false;
}

int mpt_watch_configure(bool quiet, bool every)
{
    const mpt_env_value *v = mpt_env(MPT_ENV_REPORT_ABOVE);
    if (!v->set)
        return 0;
    uint64_t bytes;
    unsigned pct;
    if (!mpt_parse_threshold(v->text, &bytes, &pct))
        return -1; /* rt_env.c already refused it */
    if (!every) {
        mpt_rt_say(quiet, "mimprof: MIMPROF_REPORT_ABOVE needs MIMPROF_EVERY (mimprof run sets "
                          "it); not watching the memory\n");
        return 0;
    }
    w.page = sysconf(_SC_PAGESIZE);
    w.pct = pct;
    if (pct == 0) {
        w.threshold = bytes;
    } else {
        char mount[4096], cg[4096];
        if (!cgroup2_mount(mount, sizeof mount) || !own_cgroup(cg, sizeof cg) ||
            mpt_watch_cgroup_limit(mount, cg, &w.limit, w.usage, sizeof w.usage) != 0) {
            mpt_rt_say(quiet,
                       "mimprof: --report-above %s: no cgroup v2 memory.max or memory.high "
                       "limits this process; not watching the memory\n",
                       v->text);
            return 0;
        }
        w.cgroup = true;
        w.threshold = w.limit / 100 * pct + w.limit % 100 * pct / 100;
    }
    if (w.threshold == 0)
        return 0;
    w.next = w.threshold;
    w.configured = true;
    return 0;
}

void mpt_watch_start(void)
{
    if (!w.configured || w.pid == getpid())
        return;
    mpt_owned_close(&w.fd); /* the parent's (a fork child): /proc/self named the parent */
    int fd = open(w.cgroup ? w.usage : "/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        mpt_owned_take(&w.fd, mpt_rt_fd_high(fd));
    w.pid = getpid();
    w.next = w.threshold;
}

bool mpt_watch_on(void) { return w.configured && w.fd.fd >= 0 && w.pid == getpid(); }

/* The memory now, bytes; 0 when it cannot be read. */
static uint64_t memory_now(void)
{
    char buf[128];
    if (!mpt_owned_check(&w.fd))
        return 0; /* the program closed it: its number is not ours to read */
    ssize_t n = pread(w.fd.fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (w.cgroup)
        return strtoull(buf, NULL, 10);
    const char *rss = strchr(buf, ' '); /* statm: size resident shared ... (pages) */
    return rss != NULL ? strtoull(rss + 1, NULL, 10) * (uint64_t)w.page : 0;
}

static void mib(char *buf, size_t len, uint64_t b)
{
    snprintf(buf, len, "%.1f MiB", (double)b / 1048576.0);
}

bool mpt_watch_check(char *why, size_t len)
{
    if (!mpt_watch_on())
        return false;
    uint64_t m = memory_now();
    uint64_t step = w.threshold / 10 ? w.threshold / 10 : 1;
    if (m + step < w.threshold) {
        w.next = w.threshold; /* fell back: the next crossing gets its report */
        return false;
    }
    if (m < w.next)
        return false;
    uint64_t crossed = w.next;
    w.next = w.threshold + ((m - w.threshold) / step + 1) * step;
    char now[32], thr[32], at[32], nxt[32], lim[32];
    mib(now, sizeof now, m);
    mib(thr, sizeof thr, w.threshold);
    mib(at, sizeof at, crossed);
    mib(nxt, sizeof nxt, w.next);
    if (w.cgroup) {
        mib(lim, sizeof lim, w.limit);
        snprintf(why, len,
                 "report-above: written because the cgroup's memory.current (%s) crossed %s "
                 "(--report-above %u%% of its limit %s = %s; the next report at %s)",
                 now, at, w.pct, lim, thr, nxt);
    } else {
        snprintf(why, len,
                 "report-above: written because the RSS (%s) crossed %s (--report-above %s; "
                 "the next report at %s)",
                 now, at, thr, nxt);
    }
    return true;
}
