/* SPDX-License-Identifier: MIT */
/* Internal: what the last heap image write cost (the benchmark reads it). */
#ifndef MIMPROF_PROFILING_HEAP_IMAGE_WRITE_H
#define MIMPROF_PROFILING_HEAP_IMAGE_WRITE_H

#include <stdint.h>

typedef struct mp_himg_timing {
    uint64_t quiet_ns;       /* g_rec.rw held exclusively: the longest a hit or free waited on it */
    uint64_t stripe_copy_ns; /* the longest one live-table stripe stayed locked for its copy */
    uint64_t write_ns;       /* mp_img_write() (trace, emit, write, fsync, rename) */
    uint64_t total_ns;       /* the whole mp_profiler_write_image() */
    uint64_t live_samples;   /* samples in the image */
} mp_himg_timing;

/* The timing of the last successful mp_profiler_write_image(). */
void mp_himg_last_timing(mp_himg_timing *out);

#endif
