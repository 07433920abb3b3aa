/* SPDX-License-Identifier: MIT */
/* Internal: reading heap images (mp_profiler_write_image's files) in any
 * process, and turning them into pprof with the report side's builder and
 * symbolizer. Used by `mimprof image`, the tests and the fuzzer; not
 * installed. The schema is heap_image_schema.h.
 *
 * Everything read from an image is untrusted: mp_himg_load() refuses, with
 * the image library's sentence, what the image library refuses (header,
 * checksums, type table), and mp_himg_from_heap() checks every object the
 * schema names (types, unit counts, bounds, references between them)
 * before anything is used. Fuzzed by profiling/fuzz/fuzz_heap_image.c.
 */
#ifndef MIMPROF_PROFILING_HEAP_IMAGE_H
#define MIMPROF_PROFILING_HEAP_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/image.h>
#include <mimprof/profiling.h>

#include "heap_image_schema.h"

typedef struct mp_himg_seg {
    uint64_t start, limit, file_offset;
} mp_himg_seg;

typedef struct mp_himg_mapping {
    char *path;                              /* as the writing process named it */
    char build_id[MP_HIMG_BUILD_ID_HEX + 1]; /* lower-case hex, "" if none */
    uint64_t base;                           /* load bias in the writing process */
    unsigned flags;                          /* MP_HIMG_MAP_* */
    mp_himg_seg *segs;
    size_t nsegs;
} mp_himg_mapping;

typedef struct mp_himg_stack {
    uint32_t depth;
    bool truncated;
    uint32_t named; /* frames that were code units (the rest were raw) */
    uintptr_t *pcs; /* return addresses in the writing process, innermost first */
} mp_himg_stack;

typedef struct mp_himg_sample {
    uint32_t stack; /* index into stacks */
    uint64_t size;
    double weight;
    uint64_t gen;
    uint64_t age_ns; /* age at the snapshot; MP_HIMG_AGE_UNKNOWN in schema 1 images */
} mp_himg_sample;

#define MP_HIMG_AGE_UNKNOWN UINT64_MAX

typedef struct mp_himg_interval {
    uint32_t stack;
    double objects, bytes;
    uint64_t records;
} mp_himg_interval;

/* An image's contents, checked. */
typedef struct mp_himg {
    uint64_t meta[MP_HIMG_META_COUNT];
    char version[64]; /* writer's mimprof-profiling version */
    mp_prof_config cfg;
    mp_prof_stats counters;
    mp_himg_mapping *maps;
    size_t nmaps;
    mp_himg_stack *stacks;
    size_t nstacks;
    mp_himg_sample *live;
    size_t nlive;
    mp_himg_interval *interval;
    size_t ninterval;
    bool has_peak; /* the optional peak roots: the window's peak so far */
    uint64_t peak[MP_HIMG_PEAK_COUNT];
    mp_himg_interval *peak_sums; /* per stack: objects, bytes, blocks (records) */
    size_t npeak;
} mp_himg;

/* Loads and checks the image at `path`. On failure returns nonzero and
 * writes one line into err: the image library's status and sentence
 * ("checksum does not match: ..."), or what the schema check refused. */
int mp_himg_load(const char *path, mp_himg **out, char *err, size_t errlen);

/* The same from memory. */
int mp_himg_load_memory(const void *data, size_t len, mp_himg **out, char *err, size_t errlen);

/* Checks a loaded heap of the schema's registry (`types`) and copies it
 * out. The heap stays the caller's. */
int mp_himg_from_heap(const mp_img_heap *heap, const mp_himg_types *types, mp_himg **out, char *err,
                      size_t errlen);

void mp_himg_free(mp_himg *img);

/* Estimated live objects and bytes of the image (the inuse totals of its
 * pprof, before rounding). */
void mp_himg_live_totals(const mp_himg *img, double *objects, double *bytes);

/* Where the symbols of a mapping are read from offline. */
typedef enum mp_himg_where {
    MP_HIMG_FOUND = 0,   /* a file with the mapping's build-id */
    MP_HIMG_NO_FILE,     /* the mapping names no file ([vdso], anonymous) */
    MP_HIMG_NO_BUILD_ID, /* the mapping has no build-id: nothing can be checked */
    MP_HIMG_MISSING,     /* no candidate file exists */
    MP_HIMG_MISMATCH     /* files exist, none with the mapping's build-id */
} mp_himg_where;

/* Finds the file to symbolize mapping `m` from: under `binary_path` (may be
 * NULL) DIR/.build-id/xx/yyyy.debug, DIR/.build-id/xx/yyyy, DIR/<path>,
 * DIR/<basename>, then the mapping's own path; only a file with the
 * mapping's build-id is taken, and among those one with a .symtab first.
 * `*file` (malloc()ed) is set when MP_HIMG_FOUND; `why` gets a sentence
 * for the other outcomes (which files had which build-id). */
mp_himg_where mp_himg_locate(const mp_himg_mapping *m, const char *binary_path, char **file,
                             char *why, size_t whylen);

typedef struct mp_himg_pprof_opts {
    const char *binary_path; /* NULL: only the mappings' own paths */
    int symbolize;           /* mp_prof_symbolize, or -1: the image's session setting */
    /* Called once per mapping with locations that could not be symbolized
     * from a checked file (build-id mismatch, missing file, no build-id). */
    void (*note)(void *ctx, const char *line);
    void *note_ctx;
    bool peak; /* the window's peak the image holds, in-use values only */
} mp_himg_pprof_opts;

/* The image as one uncompressed pprof, as mp_profiler_report() would have
 * given it in the writing process at the snapshot: the same samples,
 * values, locations and mappings. Symbolized offline from the files the
 * mappings name (checked by build-id). `*out` is malloc()ed. */
mp_prof_status mp_himg_pprof(const mp_himg *img, const mp_himg_pprof_opts *opts, uint8_t **out,
                             size_t *len);

#endif
