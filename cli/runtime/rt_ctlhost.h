/* SPDX-License-Identifier: MIT */
/* The collector as the host of this process's control socket
 * (rt_collector.h: HELLO with a page, FETCH; <mimprof/profiling_control.h>,
 * mp_prof_control_host). Under `mimprof run` the collector binds
 * `@mimprof-ctl.<pid>` and accepts its connections; the process's control
 * thread waits on a futex in a page it shares with the collector, not on
 * any descriptor, and takes the connections when they come: the process
 * holds no descriptor while nobody controls it. Not installed. */
#ifndef MIMPROF_TOOL_RT_CTLHOST_H
#define MIMPROF_TOOL_RT_CTLHOST_H

#include <stdbool.h>

#include <mimprof/profiling_control.h>

/* Says HELLO to the collector (the process is alive), with a page when
 * `host_control`: then returns the host for mp_prof_control_options::host,
 * else (or when no page could be made) NULL. At a process's start
 * (`at_start`) it waits, at most a second, for the collector to have
 * bound the control socket (mpt_coll_hello); a forked child never waits. */
const mp_prof_control_host *mpt_ctlhost_hello(bool host_control, bool at_start);

/* In a forked child, before the control's own fork handler: the parent's
 * page is let go (never touched: it is the parent's); a child that is
 * profiled says HELLO, with a page of its own when its control serves
 * (`serves`) and the parent's was hosted. */
void mpt_ctlhost_after_fork(bool profiled, bool serves);

#endif
