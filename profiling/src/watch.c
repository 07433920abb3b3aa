/* SPDX-License-Identifier: MIT */
/* The memory watch (mp_prof_watch_new in <mimprof/profiling.h>): the
 * threshold, its steps, and reading RSS or a cgroup's memory.current with
 * one pread() of a descriptor kept open.
 *
 * Memory. With a size, the process's resident set (the second field of
 * /proc/self/statm, in pages). With a percentage, among the process's
 * own cgroup and its ancestors (the `0::` line of /proc/self/cgroup under
 * the cgroup2 mount of /proc/self/mountinfo) the one with the smallest
 * memory.high or memory.max: the threshold is N% of it, the memory its
 * memory.current.
 *
 * The descriptor: close-on-exec, moved near the top of the descriptor
 * range (just below RLIMIT_NOFILE, at most 4096) out of the program's
 * way, and checked before each read to still be the file it was opened
 * on (mp_prof_fd_take, profiling.h): a program that closed it and reused the number is never
 * read. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "watch.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/profiling.h>

struct mp_prof_watch {
    bool cgroup;          /* memory = the cgroup's memory.current, else RSS */
    unsigned percent;     /* as given, 0 for a size */
    uint64_t threshold;   /* T, bytes */
    uint64_t limit;       /* the cgroup limit a percentage is of */
    uint64_t next;        /* the next event at this many bytes */
    mp_prof_owned_fd own; /* the file read (mp_prof_fd_take, profiling.h) */
    long page;
};

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

int mp_watch_cgroup_limit(const char *mount, const char *cgroup, uint64_t *limit, char *usage,
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
    static char buf[65536]; /* one watch is made at a time (the caller's thread) */
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

mp_prof_status mp_prof_watch_new(uint64_t bytes, unsigned percent, mp_prof_watch **out)
{
    if (out == NULL || (bytes == 0) == (percent == 0) || percent > 100)
        return MP_PROF_E_INVALID_CONFIG;
    *out = NULL;
#ifndef __linux__
    return MP_PROF_E_UNSUPPORTED; /* /proc and cgroup v2 are Linux's */
#endif
    mp_prof_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return MP_PROF_E_NOMEM;
    w->own = MP_PROF_OWNED_FD_NONE;
    w->page = sysconf(_SC_PAGESIZE);
    w->percent = percent;
    char usage[4200] = "/proc/self/statm";
    if (percent == 0) {
        w->threshold = bytes;
    } else {
        char mount[4096], cg[4096];
        if (!cgroup2_mount(mount, sizeof mount) || !own_cgroup(cg, sizeof cg) ||
            mp_watch_cgroup_limit(mount, cg, &w->limit, usage, sizeof usage) != 0) {
            free(w);
            return MP_PROF_E_UNSUPPORTED; /* no cgroup v2 limit on the way up */
        }
        w->cgroup = true;
        w->threshold = w->limit / 100 * percent + w->limit % 100 * percent / 100;
    }
    if (w->threshold == 0) { /* a percentage of a limit under 100 bytes */
        free(w);
        return MP_PROF_E_INVALID_CONFIG;
    }
    int fd = mp_prof_fd_open(usage, O_RDONLY, 0);
    if (fd < 0 || !mp_prof_fd_take(&w->own, fd)) {
        free(w);
        return MP_PROF_E_IO;
    }
    w->next = w->threshold;
    *out = w;
    return MP_PROF_OK;
}

/* The memory now, bytes; 0 when it cannot be read. */
static uint64_t memory_now(mp_prof_watch *w)
{
    char buf[128];
    if (!mp_prof_fd_check(&w->own))
        return 0; /* the program closed it: its number is not ours to read */
    ssize_t n = pread(w->own.fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (w->cgroup)
        return strtoull(buf, NULL, 10);
    const char *rss = strchr(buf, ' '); /* statm: size resident shared ... (pages) */
    return rss != NULL ? strtoull(rss + 1, NULL, 10) * (uint64_t)w->page : 0;
}

bool mp_prof_watch_check(mp_prof_watch *w, mp_prof_watch_event *ev)
{
    if (w == NULL)
        return false;
    uint64_t m = memory_now(w);
    uint64_t step = w->threshold / 10 ? w->threshold / 10 : 1;
    if (m + step < w->threshold) {
        w->next = w->threshold; /* fell back: the next crossing gets its event */
        return false;
    }
    if (m < w->next)
        return false;
    uint64_t crossed = w->next;
    w->next = w->threshold + ((m - w->threshold) / step + 1) * step;
    if (ev != NULL)
        *ev = (mp_prof_watch_event){.memory = m,
                                    .crossed = crossed,
                                    .threshold = w->threshold,
                                    .next = w->next,
                                    .limit = w->limit,
                                    .percent = w->percent,
                                    .cgroup = w->cgroup};
    return true;
}

void mp_prof_watch_free(mp_prof_watch *w)
{
    if (w == NULL)
        return;
    mp_prof_fd_close(&w->own);
    free(w);
}
