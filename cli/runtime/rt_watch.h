/* SPDX-License-Identifier: MIT */
/* The memory watch of the preload runtime (`mimprof run --report-above`,
 * MIMPROF_REPORT_ABOVE): a report, and a heap image when the image options
 * are on, as soon as the process's memory crosses a threshold, and again
 * at each further step. Not installed.
 *
 * Memory. With a size (`100m`), the process's resident set (RSS, the
 * second field of /proc/self/statm). With a percentage (`90%`), the
 * cgroup v2 memory the kernel charges against the limits: among the
 * process's own cgroup and its ancestors (the `0::` line of
 * /proc/self/cgroup under the cgroup2 mount of /proc/self/mountinfo), the
 * one with the smallest `memory.high` or `memory.max`; the threshold is N%
 * of that limit and the memory its `memory.current`. No such limit: one
 * line says so and nothing is watched (profiling goes on).
 *
 * Steps. The first report is written when the memory reaches the
 * threshold T; the next ones at T + T/10, T + 2T/10, ... (each further
 * tenth of T), one report per look however many steps were passed. When
 * the memory falls below T - T/10 the watch re-arms at T: each spike that
 * crosses T gets its report.
 *
 * Cost. The reporter thread (never the allocation path) reads the one
 * descriptor every MPT_WATCH_POLL_MS with pread(): a report fires within
 * that interval plus the report's own time of the crossing. The
 * descriptor is opened once per process (a followed fork child opens its
 * own: /proc/self is resolved at open), close-on-exec, at the top of the
 * descriptor range like the runtime's other one (rt_common.h). */
#ifndef MIMPROF_TOOL_RT_WATCH_H
#define MIMPROF_TOOL_RT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPT_WATCH_POLL_MS 200u

/* Reads MIMPROF_REPORT_ABOVE (after mpt_env_load) and, for a percentage,
 * finds the cgroup limit. `every` is whether MIMPROF_EVERY is set (the
 * watch needs the reporter thread). 0: configured, on or off (a line said
 * why it is off); -1: a malformed value (said). */
int mpt_watch_configure(bool quiet, bool every);

/* In the process that profiles (at start, and in a followed fork child):
 * opens its descriptor. */
void mpt_watch_start(void);

/* The threshold is set and its descriptor open. */
bool mpt_watch_on(void);

/* Reads the memory now. True when it reached the next threshold: `why`
 * then holds one sentence for the report's comments. */
bool mpt_watch_check(char *why, size_t len);

/* For tests: in the cgroup2 tree mounted at `mount`, the smallest of
 * memory.high and memory.max of `cgroup` (a path like "/a/b") and its
 * ancestors; its memory.current's path into `usage`. 0, or -1 (none). */
int mpt_watch_cgroup_limit(const char *mount, const char *cgroup, uint64_t *limit, char *usage,
                           size_t cap);

#endif
