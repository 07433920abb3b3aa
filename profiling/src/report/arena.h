/* SPDX-License-Identifier: MIT */
/* Internal to the report side: a bump arena. What it hands out never
 * moves and lives until mp_arena_clear; chunks of at least 60,000 bytes,
 * each allocation aligned to max_align_t. */
#ifndef MIMPROF_PROFILING_REPORT_ARENA_H
#define MIMPROF_PROFILING_REPORT_ARENA_H

#include <stddef.h>

typedef struct mp_arena_chunk mp_arena_chunk;

typedef struct mp_arena {
    mp_arena_chunk *head;
    size_t bytes; /* held, headers included */
} mp_arena;

/* n bytes; NULL on out-of-memory. */
void *mp_arena_alloc(mp_arena *a, size_t n);
/* Frees every chunk; the arena is empty and usable again. */
void mp_arena_clear(mp_arena *a);

#endif
