/* SPDX-License-Identifier: MIT */
/* The memory watch of the preload runtime (`mimprof run --report-above`,
 * MIMPROF_REPORT_ABOVE): a report, and a heap image when the image options
 * are on, as soon as the process's memory crosses a threshold, and again
 * at each further step. Not installed.
 *
 * Memory and steps: the library's watch (mp_prof_watch_new in
 * <mimprof/profiling.h>): with a size (`100m`) the RSS, with a percentage
 * (`90%`) the cgroup v2 memory against the smallest memory.high or
 * memory.max on the way up; a report at the threshold T, at each further
 * tenth of T, and again after the memory fell below T - T/10. No cgroup
 * limit: one line says so and nothing is watched (profiling goes on).
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

#endif
