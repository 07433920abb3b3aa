/* SPDX-License-Identifier: MIT */
/* Internal contract between the recorder (src/recorder, src/session) and
 * the report side (src/pprof, src/symbols): how aggregated samples become
 * pprof bytes. Not installed; not part of the public API.
 *
 * Threading: a builder is used by one thread (the reporting thread), which
 * holds the profiler's recursion guard, so malloc() here is never sampled.
 * Nothing here may be called from an allocation hook.
 */
#ifndef MIMPROF_PROFILING_REPORT_BUILDER_H
#define MIMPROF_PROFILING_REPORT_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h> /* mp_prof_symbolize, mp_prof_status */

/* Indices into the value vector of one sample, in pprof sample_type order. */
enum {
    MP_VAL_ALLOC_OBJECTS = 0, /* alloc_objects/count */
    MP_VAL_ALLOC_SPACE = 1,   /* alloc_space/bytes */
    MP_VAL_INUSE_OBJECTS = 2, /* inuse_objects/count */
    MP_VAL_INUSE_SPACE = 3,   /* inuse_space/bytes */
    MP_VAL_COUNT = 4
};

typedef struct mp_report_options {
    uint64_t period;             /* the sampling interval in bytes (period type space/bytes) */
    int64_t time_nanos;          /* wall-clock start of the reported interval */
    int64_t duration_nanos;      /* length of the reported interval */
    mp_prof_symbolize symbolize; /* none | functions | lines */
    bool inuse_only;             /* sample types inuse_objects/inuse_space only (a peak profile) */
} mp_report_options;

/* Process-lifetime caches of the report side (mappings, symbols), owned by
 * the session and kept across its reports. Created lazily at the first
 * report; never touched by allocation hooks. */
typedef struct mp_report_cache mp_report_cache;

mp_report_cache *mp_report_cache_new(void);
void mp_report_cache_free(mp_report_cache *c);
/* Bytes of symbol data held, for mp_prof_diagnostics. */
size_t mp_report_cache_symbol_bytes(const mp_report_cache *c);
/* mp_prof_symbol_quality of the last report finished with this cache
 * (computed while encoding, no decode needed), -1 before the first; for
 * mp_prof_stats.last_symbol_quality. */
int mp_report_cache_last_quality(const mp_report_cache *c);

typedef struct mp_report_builder mp_report_builder;

/* Starts one report; NULL on out-of-memory. */
mp_report_builder *mp_report_begin(mp_report_cache *cache, const mp_report_options *opt);

/* Adds one aggregated sample. `pcs[0]` is the innermost application frame
 * (profiler frames already cut by mp_frames_skip_profiler); `truncated`
 * says the stack was cut at max_stack_depth (the builder marks it).
 * `values` are unrounded estimator sums (MP_VAL_*). `interval` marks an
 * allocation (interval) sample: it carries the label __delta__="false";
 * a live sample added here carries no label (mp_report_add_aged gives it
 * its age). Samples with equal stacks and equal `interval` may be added
 * more than once; the builder sums them. */
mp_prof_status mp_report_add(mp_report_builder *b, const uintptr_t *pcs, size_t depth,
                             bool truncated, const double values[MP_VAL_COUNT], bool interval);

/* Like mp_report_add, for a live sample (interval false) whose objects
 * are of age bucket `age_bucket` (age.h): the sample carries the numeric
 * label `age` (the bucket's lower bound, unit "seconds"). MP_AGE_NONE
 * adds no label (mp_report_add). Samples are summed per (stack,
 * interval, age bucket). */
mp_prof_status mp_report_add_aged(mp_report_builder *b, const uintptr_t *pcs, size_t depth,
                                  bool truncated, const double values[MP_VAL_COUNT], bool interval,
                                  unsigned age_bucket);

/* Appends a comment (copied) to the profile's comments, in call order
 * (go tool pprof -comments shows them). */
mp_prof_status mp_report_comment(mp_report_builder *b, const char *text);

/* Encodes the profile (values rounded once, here) into a malloc()ed buffer
 * the caller frees with free(); frees the builder in every case. */
mp_prof_status mp_report_finish(mp_report_builder *b, uint8_t **out, size_t *len);

/* Drops a builder without encoding. */
void mp_report_abort(mp_report_builder *b);

#endif
