/* SPDX-License-Identifier: MIT */
/* Bump allocation on mmap()ed chunks for the runtime's own work on the
 * control thread (the cumulative profile, rt_cumul.c): nothing it holds
 * passes through the malloc the profiler samples, so none of it shows up
 * in the program's profile. Freed all at once. Not installed. */
#ifndef MIMPROF_TOOL_RT_ARENA_H
#define MIMPROF_TOOL_RT_ARENA_H

#include <stddef.h>

typedef struct mpt_arena_chunk mpt_arena_chunk;

typedef struct {
    mpt_arena_chunk *head;
} mpt_arena;

/* `n` bytes aligned to 16, or NULL when the system has no memory. */
void *mpt_arena_alloc(mpt_arena *a, size_t n);

/* Unmaps every chunk; the arena is empty and reusable. */
void mpt_arena_free(mpt_arena *a);

/* Anonymous memory of `n` bytes (mmap), and its release. */
void *mpt_map(size_t n);
void mpt_unmap(void *p, size_t n);

#endif
