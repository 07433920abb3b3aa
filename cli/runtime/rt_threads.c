/* SPDX-License-Identifier: MIT */
/* The state of every thread of this process in one line (issue 39): for
 * a bounded wait of the runtime that ran out (the last report at _exit()
 * or a fatal signal, rt_fatal.c), so that a hang the bound cut short is
 * diagnosable from the log, where it would otherwise show only as a
 * missing report. Each thread: its id, name, scheduler state and the
 * kernel function it sleeps in (/proc/self/task), one of them marked.
 *
 * Runs in signal handlers and in _exit(): open, read, getdents64 and
 * snprintf of integers and strings only; no allocation, no lock. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt_threads.h"

/* The first line of /proc/self/task/TID/FILE, at most cap - 1 bytes. */
static size_t read_task(const char *tid, const char *file, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/%s", tid, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0)
        return 0;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return (size_t)n;
}

/* " TID name[(mark)]:S@wchan" for one thread (name and state from stat). */
static size_t describe(const char *tid, pid_t marked, const char *mark, char *out, size_t cap)
{
    char stat[512], wchan[64];
    if (read_task(tid, "stat", stat, sizeof stat) == 0)
        return 0;
    char *name = strchr(stat, '('), *end = strrchr(stat, ')');
    if (name == NULL || end == NULL || end[1] == '\0' || end[2] == '\0')
        return 0;
    *end = '\0';
    if (read_task(tid, "wchan", wchan, sizeof wchan) == 0 || strcmp(wchan, "0") == 0)
        strcpy(wchan, "-");
    bool is_marked = marked > 0 && strtol(tid, NULL, 10) == (long)marked;
    int n = snprintf(out, cap, " %s %s%s%s%s:%c@%s", tid, name + 1, is_marked ? "(" : "",
                     is_marked ? mark : "", is_marked ? ")" : "", end[2], wchan);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t mpt_rt_threads_describe(char *out, size_t cap, pid_t marked, const char *mark)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    out[0] = '\0';
    int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    char ents[4096];
    long got;
    while (n + 1 < cap && (got = syscall(SYS_getdents64, dir, ents, sizeof ents)) > 0) {
        for (long off = 0; off < got;) {
            struct dirent64 *d = (struct dirent64 *)(ents + off);
            off += d->d_reclen;
            if (d->d_name[0] != '.' && n + 1 < cap)
                n += describe(d->d_name, marked, mark, out + n, cap - n);
        }
    }
    close(dir);
    return n;
}
