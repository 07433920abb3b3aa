/* SPDX-License-Identifier: MIT */
/* Internal to mimprof-profiling: the cgroup lookup of the memory watch
 * (watch.c), for tests on a made-up tree. */
#ifndef MIMPROF_PROFILING_WATCH_H
#define MIMPROF_PROFILING_WATCH_H

#include <stddef.h>
#include <stdint.h>

/* In the cgroup2 tree mounted at `mount`, the smallest of memory.high and
 * memory.max of `cgroup` (a path like "/a/b") and its ancestors; its
 * memory.current's path into usage[cap]. 0, or -1 (none). */
int mp_watch_cgroup_limit(const char *mount, const char *cgroup, uint64_t *limit, char *usage,
                          size_t cap);

#endif
