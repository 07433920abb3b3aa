/* SPDX-License-Identifier: MIT */
/* The allocator's resident bytes (rt_resident.h): walk /proc/self/maps,
 * keep the anonymous mappings, ask the allocator which granules of them
 * are its own, and count their resident pages with mincore(). Runs on
 * the reporting thread, in the statistics hook (under the session lock
 * and the recursion guard), so it allocates nothing: the maps are read
 * through a stack buffer line by line.
 *
 * Races: another thread may unmap a region between the read of the maps
 * and mincore(); mincore() then fails with ENOMEM for that run and it
 * counts nothing, which is right (it is no longer resident). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_resident.h"

/* Resident bytes of [a, b) (page-aligned), by mincore() in chunks of at
 * most sizeof vec pages. */
static uint64_t resident_run(uintptr_t a, uintptr_t b, uintptr_t page)
{
    unsigned char vec[4096];
    uint64_t n = 0;
    while (a < b) {
        uintptr_t len = b - a;
        if (len / page > sizeof vec)
            len = sizeof vec * page;
        if (mincore((void *)a, len, vec) == 0)
            for (uintptr_t i = 0; i < len / page; i++)
                n += vec[i] & 1;
        a += len;
    }
    return n * page;
}

/* One mapping [start, end): the resident bytes of its owned granules,
 * coalesced into runs so that mincore() is called once per run. */
static uint64_t resident_mapping(mpt_rt_owns_fn owns, uintptr_t start, uintptr_t end,
                                 uintptr_t page)
{
    uint64_t n = 0;
    uintptr_t run = 0; /* start of the current owned run, 0 = none */
    for (uintptr_t g = start & ~(MPT_RT_GRANULE - 1); g < end; g += MPT_RT_GRANULE) {
        uintptr_t a = g < start ? start : g;
        if (owns((const void *)a)) {
            if (run == 0)
                run = a;
        } else if (run != 0) {
            n += resident_run(run, a, page);
            run = 0;
        }
        if (g + MPT_RT_GRANULE < g) /* the top of the address space */
            break;
    }
    if (run != 0)
        n += resident_run(run, end, page);
    return n;
}

/* A line of /proc/self/maps: "start-end perms offset dev inode [path]".
 * Anonymous (no path) and readable mappings count; stacks and the
 * kernel's "[...]" areas have a path. */
static uint64_t maps_line(mpt_rt_owns_fn owns, const char *s, uintptr_t page)
{
    char *e;
    uintptr_t start = (uintptr_t)strtoull(s, &e, 16);
    if (*e != '-')
        return 0;
    uintptr_t end = (uintptr_t)strtoull(e + 1, &e, 16);
    if (*e != ' ' || e[1] != 'r' || end <= start)
        return 0;
    /* Skip perms, offset, dev, inode: the path (if any) follows. */
    for (int f = 0; f < 4; f++) {
        while (*e == ' ')
            e++;
        while (*e != ' ' && *e != '\0')
            e++;
    }
    while (*e == ' ')
        e++;
    return *e == '\0' ? resident_mapping(owns, start, end, page) : 0;
}

bool mpt_rt_resident_bytes(mpt_rt_owns_fn owns, uint64_t *out)
{
    long ps = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ps <= 0) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    char buf[8192];
    size_t have = 0;
    uint64_t total = 0;
    bool ok = true;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ok = false;
            break;
        }
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
            *nl = '\0';
            total += maps_line(owns, line, (uintptr_t)ps);
            line = nl + 1;
        }
        size_t rest = have - (size_t)(line - buf);
        if (r == 0) { /* a last line without its newline */
            if (rest > 0)
                total += maps_line(owns, line, (uintptr_t)ps);
            break;
        }
        if (rest == sizeof buf - 1) /* a line longer than the buffer: a long path, skip it */
            rest = 0;
        memmove(buf, line, rest);
        have = rest;
    }
    close(fd);
    if (ok)
        *out = total;
    return ok;
}
