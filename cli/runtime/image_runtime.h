/* SPDX-License-Identifier: MIT */
/* Heap images in the preload runtime (runtime mode: `mimprof run`, see
 * preload_runtime.h): the environment's image triggers, an image thread,
 * and the calls preload_runtime.c makes at start, SIGUSR2, fork and exit.
 * Not installed.
 *
 * Variables:
 *   MIMPROF_IMAGE          a directory (created if missing; relative to the
 *                          working directory at start): heap images go to
 *                          DIR/heap.<pid>.<seq>.mpimg. Setting it alone
 *                          makes SIGUSR2 write an image (before the report
 *                          SIGUSR2 already writes).
 *   MIMPROF_IMAGE_EVERY    also write one every DURATION (10s, 500ms, 1m)
 *   MIMPROF_IMAGE_ON_EXIT  1: also write one at exit, before the final
 *                          report (exit() or a return from main)
 * The last two need MIMPROF_IMAGE. A malformed value is reported on stderr
 * and the process runs unprofiled (as for the runtime's other variables).
 *
 * Images are written by mp_profiler_write_image() on the image thread
 * (signals blocked, like the reporter's), or by the exiting thread; a
 * write never blocks the program's threads beyond the profiler's quiet
 * point (profiling.h). Forked children that the runtime follows write
 * their own, under their pid.
 */
#ifndef MIMPROF_TOOL_IMAGE_RUNTIME_H
#define MIMPROF_TOOL_IMAGE_RUNTIME_H

#include <stdbool.h>

#include <mimprof/profiling.h>

/* Reads the variables (once, at start). 0: fine (images on or off);
 * -1: a malformed value (said on stderr unless quiet). */
int mpt_rt_image_configure(bool quiet);

/* Before a session starts in this process (so that what it allocates is
 * not sampled): numbers this process's images. */
void mpt_rt_image_prepare(void);

/* A session started in this process: starts the image thread. */
void mpt_rt_image_start(mp_profiler *prof);

/* SIGUSR2: asks the image thread for an image. Async-signal-safe. */
void mpt_rt_image_request(void);

/* In a forked child, before the runtime starts its own session: the
 * parent's image thread does not exist here. */
void mpt_rt_image_after_fork(void);

/* The session is about to end: stops the image thread, then writes the
 * exit image when MIMPROF_IMAGE_ON_EXIT asks for it and `at_exit`. */
void mpt_rt_image_stop(bool at_exit);

#endif
