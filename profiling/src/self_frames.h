/* SPDX-License-Identifier: MIT */
/* Internal: which instruction addresses belong to the profiler itself, so
 * that captured stacks start at the application's frame. By address range,
 * never by name: an application function named like a profiler function,
 * or one that calls the profiler's API, is kept.
 *
 * Ranges: the executable segments of the object that contains the
 * profiler's code (libmimprof-profiling.so, or the preload object that
 * links it statically), of libunwind, and every hook range registered by a
 * sampling-allocator instantiation (MP_PROF_SAMPLING_ALLOCATOR puts its
 * functions in the section "mimprof_hooks" of the object that instantiates
 * it and registers __start_/__stop_ of that section from a constructor).
 */
#ifndef MIMPROF_PROFILING_SELF_FRAMES_H
#define MIMPROF_PROFILING_SELF_FRAMES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Computes the profiler's own ranges (platform layer; may allocate; takes
 * the loader lock). Called at session start, under the recursion guard,
 * never from an allocation hook. Idempotent. */
void mp_self_frames_init(void);

/* Registers [start, end) as profiler code (a hook section). Async-signal
 * and hook safe: a fixed table, no allocation. */
void mp_self_frames_register(uintptr_t start, uintptr_t end);

/* Number of leading entries of pcs[0..n) that are profiler frames. Hook
 * safe: reads the fixed table only. */
size_t mp_frames_skip_profiler(const uintptr_t *pcs, size_t n);

/* The table's version: it grows after every change of what
 * mp_frames_skip_profiler answers (a range published, the static mode
 * found) is visible. An answer computed after reading version v holds for
 * the same frames as long as the version reads v. Never 0. */
extern _Atomic uint64_t mp_self_frames_version_;
static inline uint64_t mp_self_frames_version(void)
{
    return atomic_load_explicit(&mp_self_frames_version_, memory_order_acquire);
}

/* Whether the profiler's code is in the main executable (static mode:
 * leading application frames can be cut too, see self_frames.c). */
bool mp_self_frames_static_mode(void);

#endif
