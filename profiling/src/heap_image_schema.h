/* SPDX-License-Identifier: MIT */
/* Internal: the schema of a heap image, shared by the writer
 * (heap_image.c, in the profiled process) and the reader
 * (heap_image_read.c, in `mimprof image` or any other process).
 *
 * A heap image is a mimprof-image file (image/FORMAT.md) whose types are
 * registered by mp_himg_registry_new(), in this order (the order is part
 * of the image's type table, which the loader compares):
 *
 * | # | type | shape | units |
 * |---|---|---|---|
 * | 0 | `mimprof.str` | `word bytes` | length, bytes (not NUL-terminated in the image) |
 * | 1 | `mimprof.words` | `*: word` | count, values |
 * | 2 | `mimprof.refs` | `*: word ref` | count, objects |
 * | 3 | `mimprof.mapping` | `ref ref ref word word` | path (str), build-id (str, lower-case hex, "" if none), segments (words: start, limit, file offset per segment), load bias, flags (MP_HIMG_MAP_*) |
 * | 4 | `mimprof.stack` | `*: word word ref foreign` | count, flags (MP_HIMG_STACK_*), raw (words or nil), then one `code` foreign unit per frame, innermost first |
 * | 5 | `mimprof.live` | `ref ref` | the live samples of one stack: stack, samples (words per sample, in live-table order: requested size, weight as IEEE-754 double bits (the objects it stands for), session generation, age in nanoseconds at the snapshot (schema 2; schema 1 has the first three words only)) |
 * | 6 | `mimprof.interval` | `ref word word word` | allocations since the last report, per stack: stack, objects (double bits), bytes (double bits), records |
 *
 * Frames are return addresses named `code(build-id, path, offset)` by the
 * image library (offset = address - load bias of the module). A frame in
 * an object the vocabulary cannot name (no build-id, or no longer loaded)
 * is a nil foreign unit, and its address is in the stack's `raw` words
 * (depth words, 0 for the frames named by code units); `raw` is nil when
 * every frame is named. The reader maps a code unit back to the address
 * it had in the writing process through the mapping with the same
 * build-id (address = bias + offset), so the pprof made from an image has
 * the locations and mappings the live process's report() gives.
 *
 * Live samples are grouped by stack (one object and one words object per
 * stack, not per sample): the writer's cost is per object, and a session
 * holds far more samples than stacks. Within a stack the samples keep the
 * live table's order, so the reader sums them in the order report() does.
 *
 * Roots (each exactly once):
 *
 * | root | object | contents |
 * |---|---|---|
 * | `mimprof.meta` | words | MP_HIMG_META_* |
 * | `mimprof.version` | str | the writer's mimprof-profiling version |
 * | `mimprof.config` | words | MP_HIMG_CFG_* (the session's mp_prof_config) |
 * | `mimprof.counters` | words | MP_HIMG_CTR_* (mp_prof_stats at the snapshot) |
 * | `mimprof.mappings` | refs | mappings, in the order of the report side's cache (pprof mapping ids follow it) |
 * | `mimprof.live` | refs | live samples, one `mimprof.live` per stack (in the order the live table first meets the stacks) |
 * | `mimprof.interval` | refs | intervals |
 * | `mimprof.peak` | refs | the current window's peak so far (peak.c), per stack, as `mimprof.interval` objects: stack, inuse objects, inuse bytes, sampled blocks (optional, see below) |
 * | `mimprof.peak_meta` | words | MP_HIMG_PEAK_* (optional, see below) |
 *
 * The two peak roots are optional, together: images written before the
 * window's peak existed have neither (their reader reports no peak), and
 * a reader that does not know them ignores them, so they change neither
 * the types nor the schema number.
 * A change to anything else here changes MP_HIMG_SCHEMA (and, for the types, the
 * image's type digest, which makes older readers refuse it by name).
 */
#ifndef MIMPROF_PROFILING_HEAP_IMAGE_SCHEMA_H
#define MIMPROF_PROFILING_HEAP_IMAGE_SCHEMA_H

#include <mimprof/image.h>
#include <mimprof/profiling.h>

/* 2: live samples gained their age at the snapshot (a fourth word).
 * Readers read schema 1 too (ages unknown: no age labels). */
#define MP_HIMG_SCHEMA    2u
#define MP_HIMG_SCHEMA_V1 1u

enum mp_himg_type_index {
    MP_HIMG_T_STR = 0,
    MP_HIMG_T_WORDS,
    MP_HIMG_T_REFS,
    MP_HIMG_T_MAPPING,
    MP_HIMG_T_STACK,
    MP_HIMG_T_LIVE,
    MP_HIMG_T_INTERVAL,
    MP_HIMG_T_COUNT
};

/* The registered types of one registry, by index. */
typedef struct mp_himg_types {
    const mp_img_type *t[MP_HIMG_T_COUNT];
} mp_himg_types;

#define MP_HIMG_ROOT_META      "mimprof.meta"
#define MP_HIMG_ROOT_VERSION   "mimprof.version"
#define MP_HIMG_ROOT_CONFIG    "mimprof.config"
#define MP_HIMG_ROOT_COUNTERS  "mimprof.counters"
#define MP_HIMG_ROOT_MAPPINGS  "mimprof.mappings"
#define MP_HIMG_ROOT_LIVE      "mimprof.live"
#define MP_HIMG_ROOT_INTERVAL  "mimprof.interval"
#define MP_HIMG_ROOT_PEAK      "mimprof.peak"
#define MP_HIMG_ROOT_PEAK_META "mimprof.peak_meta"

/* mimprof.peak_meta words (mp_prof_peak_info of the window so far). */
enum {
    MP_HIMG_PEAK_BYTES = 0,  /* the live estimate at the mark, rounded */
    MP_HIMG_PEAK_TIME_NS,    /* wall clock of the mark */
    MP_HIMG_PEAK_NSTACKS,    /* entries in mimprof.peak */
    MP_HIMG_PEAK_SAMPLES,    /* sampled blocks in the peak set */
    MP_HIMG_PEAK_INCOMPLETE, /* 1: memory ran out keeping the set */
    MP_HIMG_PEAK_COUNT
};

/* mimprof.meta words. */
enum {
    MP_HIMG_META_SCHEMA = 0,  /* MP_HIMG_SCHEMA */
    MP_HIMG_META_PID,         /* the writing process */
    MP_HIMG_META_SNAPSHOT_NS, /* wall clock (ns since the epoch) of the snapshot */
    MP_HIMG_META_INTERVAL_NS, /* wall clock of the start of the interval (last report) */
    MP_HIMG_META_GENERATION,  /* the session's generation */
    MP_HIMG_META_NLIVE,       /* samples in mimprof.live (over all its stacks) */
    MP_HIMG_META_NINTERVAL,   /* entries in mimprof.interval */
    MP_HIMG_META_NSTACKS,     /* distinct stacks */
    MP_HIMG_META_COUNT
};

/* mimprof.config words (mp_prof_config). */
enum {
    MP_HIMG_CFG_INTERVAL = 0,
    MP_HIMG_CFG_MAX_DEPTH,
    MP_HIMG_CFG_RING,
    MP_HIMG_CFG_MAX_LIVE,
    MP_HIMG_CFG_SEED,
    MP_HIMG_CFG_SYMBOLIZE,
    MP_HIMG_CFG_OVERFLOW,
    MP_HIMG_CFG_REPORT_MAX,
    MP_HIMG_CFG_COUNT
};

/* mimprof.counters words (mp_prof_stats; booleans as 0/1,
 * last_symbol_quality as a two's complement word). */
enum {
    MP_HIMG_CTR_TAKEN = 0,
    MP_HIMG_CTR_REPORTED,
    MP_HIMG_CTR_DROPPED_REGISTRATION,
    MP_HIMG_CTR_DROPPED_TEARDOWN,
    MP_HIMG_CTR_DROPPED_OVERFLOW_FULL,
    MP_HIMG_CTR_DROPPED_LIVE_TABLE_FULL,
    MP_HIMG_CTR_RING_RECORDS,
    MP_HIMG_CTR_OVERFLOW_RECORDS,
    MP_HIMG_CTR_LIVE_SAMPLES,
    MP_HIMG_CTR_REGISTERED_THREADS,
    MP_HIMG_CTR_LAST_REPORT_NANOS,
    MP_HIMG_CTR_SYMBOL_BYTES,
    MP_HIMG_CTR_LAST_SYMBOL_QUALITY,
    MP_HIMG_CTR_RECORDS_DISCARDED,
    MP_HIMG_CTR_STACKS,
    MP_HIMG_CTR_ACTIVE,
    MP_HIMG_CTR_ALLOCATOR_OBSERVED,
    MP_HIMG_CTR_COUNT
};

/* mimprof.mapping flags. */
enum {
    MP_HIMG_MAP_MAIN = 1,   /* the main program */
    MP_HIMG_MAP_FILE = 2,   /* path names a file (not "[vdso]") */
    MP_HIMG_MAP_LOADED = 4, /* loaded at the snapshot (else retained after dlclose) */
    MP_HIMG_MAP_FLAGS = 7
};

/* mimprof.stack flags. */
enum {
    MP_HIMG_STACK_TRUNCATED = 1, /* cut at max_stack_depth */
    MP_HIMG_STACK_FLAGS = 1
};

/* Units of the fixed-shape types and the fixed units of a stack. */
enum {
    MP_HIMG_MAPPING_UNITS = 5,
    MP_HIMG_LIVE_UNITS = 2,
    MP_HIMG_SAMPLE_WORDS = 4,    /* words per live sample */
    MP_HIMG_SAMPLE_WORDS_V1 = 3, /* words per live sample of schema 1 */
    MP_HIMG_INTERVAL_UNITS = 4,
    MP_HIMG_STACK_HEAD = 3
};

/* Bounds the reader enforces (the writer never exceeds them). */
#define MP_HIMG_PATH_MAX     4096u                   /* bytes of a path */
#define MP_HIMG_BUILD_ID_HEX 128u                    /* hex digits of a build-id */
#define MP_HIMG_MAX_SEGS     64u                     /* executable segments of one mapping */
#define MP_HIMG_MAX_DEPTH    MP_PROF_MAX_STACK_DEPTH /* frames of one stack */
/* Bytes of an image file mp_himg_load() reads (a process's live samples
 * are at most max_live_samples, 1<<20 by default: a few hundred MiB at
 * most); a larger file, or one that never ends (/dev/zero), is refused. */
#define MP_HIMG_MAX_FILE ((size_t)1 << 30)

/* A new registry (metadata width 0) with the schema's types registered,
 * and the types by index in `types`. Free with mp_img_registry_free(). */
mp_img_status mp_himg_registry_new(mp_img_registry **out, mp_himg_types *types, mp_img_error *err);

/* The counters' words (MP_HIMG_CTR_COUNT of them) from mp_prof_stats,
 * and back: the one list of which field is which word. */
void mp_himg_counters_put(mp_img_word *k, const mp_prof_stats *s);
void mp_himg_counters_get(mp_prof_stats *s, const mp_img_word *k);

#endif
