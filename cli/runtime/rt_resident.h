/* SPDX-License-Identifier: MIT */
/* The resident bytes of an allocator's memory, measured (rt_resident.c).
 * For an allocator that keeps no resident figure itself (mimalloc 2.0:
 * its `committed` counts pages never touched, so RSS minus it came out
 * negative), so that a report's "outside the allocator" is what its name
 * says: resident memory that is not the allocator's. */
#ifndef MIMPROF_RT_RESIDENT_H
#define MIMPROF_RT_RESIDENT_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the allocator owns the memory at `p` (mi_is_in_heap_region). */
typedef bool (*mpt_rt_owns_fn)(const void *p);

/* Granule of the ownership test: the allocator hands out whole aligned
 * granules of this size (mimalloc: 64 KiB slices of its segments, which
 * are aligned to several MiB), so one probe per granule decides all of it. */
#define MPT_RT_GRANULE ((uintptr_t)64 << 10)

/* Sums the resident pages (mincore) of the granules `owns` claims in the
 * process's anonymous mappings (/proc/self/maps). Reads through a
 * close-on-exec descriptor and stack buffers, allocates nothing. False
 * when the maps cannot be read (then *out is untouched). */
bool mpt_rt_resident_bytes(mpt_rt_owns_fn owns, uint64_t *out);

#endif
