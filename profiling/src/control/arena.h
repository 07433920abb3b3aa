/* SPDX-License-Identifier: MIT */
/* Bump allocation on mmap()ed chunks for the control's own work on its
 * thread (the cumulative profile, cumul.c): nothing it holds
 * passes through the malloc the profiler samples, so none of it shows up
 * in the program's profile. Freed all at once. Not installed. */
#ifndef MIMPROF_PROFILING_CONTROL_ARENA_H
#define MIMPROF_PROFILING_CONTROL_ARENA_H

#include <stddef.h>

typedef struct mpc_arena_chunk mpc_arena_chunk;

typedef struct {
    mpc_arena_chunk *head;
} mpc_arena;

/* `n` bytes aligned to 16, or NULL when the system has no memory. */
void *mpc_arena_alloc(mpc_arena *a, size_t n);

/* Unmaps every chunk; the arena is empty and reusable. */
void mpc_arena_free(mpc_arena *a);

/* Anonymous memory of `n` bytes (mmap), and its release. */
void *mpc_map(size_t n);
void mpc_unmap(void *p, size_t n);

#endif
