/* SPDX-License-Identifier: MIT */
/* Internal views of the profiler-frame table, for tests and diagnostics. */
#ifndef MIMPROF_PROFILING_REPORT_SELF_FRAMES_INTERNAL_H
#define MIMPROF_PROFILING_REPORT_SELF_FRAMES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Capacity of the fixed range table (objects + hook sections). */
#define MP_SELF_MAX_RANGES 64
/* Static linking: how deep a hook frame is looked for (see self_frames.c). */
#define MP_SELF_SCAN_FRAMES 32

/* Copies up to `cap` published ranges; returns how many. */
size_t mp_self_frames_ranges(uintptr_t *starts, uintptr_t *ends, int *hooks, size_t cap);
/* Registrations that found the table full. */
uint64_t mp_self_frames_dropped(void);

#endif
