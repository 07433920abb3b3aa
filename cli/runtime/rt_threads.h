/* SPDX-License-Identifier: MIT */
/* The state of every thread of this process, for a wait that ran out
 * (rt_threads.c). */
#ifndef MIMPROF_RT_THREADS_H
#define MIMPROF_RT_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Writes " TID name:S@wchan" for every thread of this process into out
 * (NUL-terminated, cut at cap), "name(mark)" for thread `marked` (0:
 * none); returns the length. Async-signal-safe. */
size_t mpt_rt_threads_describe(char *out, size_t cap, pid_t marked, const char *mark);

#endif
