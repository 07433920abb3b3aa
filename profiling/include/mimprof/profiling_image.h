/* SPDX-License-Identifier: MIT */
/**
 * @file profiling_image.h
 * Reading heap images offline: the files mp_profiler_write_image() writes,
 * opened in any process (later, on another machine with the same
 * binaries) and turned into the pprof mp_profiler_report() would have
 * given at the snapshot, or inspected (`mimprof image pprof|top|diff|info`
 * is built on this).
 *
 * Everything read from an image is untrusted: mp_prof_image_open()
 * refuses what the image library refuses (header, checksums, type table)
 * and checks every object the heap-image schema names (types, counts,
 * bounds, references) before anything is used.
 *
 * Usage:
 *
 *     mp_prof_image *img; char why[1024];
 *     if (mp_prof_image_open("heap.mpimg", &img, why, sizeof why) != MP_PROF_OK)
 *         fprintf(stderr, "%s\n", why);
 *     uint8_t *pb; size_t len;
 *     mp_prof_image_pprof(img, NULL, &pb, &len);   // uncompressed pprof
 *     mp_prof_buffer_free(pb);
 *     mp_prof_image_free(img);
 *
 * Opening and reading an image never starts a session and never touches
 * the process recorder: any program may read images, profiled or not.
 */
#ifndef MIMPROF_PROFILING_IMAGE_H
#define MIMPROF_PROFILING_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A heap image read and checked (opaque). */
typedef struct mp_prof_image mp_prof_image;

/**
 * Reads and checks the heap image at `path`.
 * @param path   the file (as mp_profiler_write_image() wrote it)
 * @param out    receives the image on success
 * @param why    receives one sentence on failure: the image library's status
 *               and detail ("checksum does not match: ..."), or what the
 *               schema check refused. May be NULL when `whylen` is 0.
 * @param whylen size of `why`
 * @return MP_PROF_OK and `*out`; MP_PROF_E_INVALID_CONFIG (NULL argument),
 *         MP_PROF_E_BAD_IMAGE (the file cannot be read or is not a heap
 *         image this version reads; `why` says which) otherwise.
 */
MP_PROF_API mp_prof_status mp_prof_image_open(const char *path, mp_prof_image **out, char *why,
                                              size_t whylen);

/** The same from `len` bytes at `data` (not retained). */
MP_PROF_API mp_prof_status mp_prof_image_open_memory(const void *data, size_t len,
                                                     mp_prof_image **out, char *why, size_t whylen);

/** Releases `img`. NULL is a no-op. */
MP_PROF_API void mp_prof_image_free(mp_prof_image *img);

/** What an image says about the process and session that wrote it. */
typedef struct mp_prof_image_info {
    char version[64];           /**< the writer's mimprof-profiling version */
    uint64_t pid;               /**< the writing process */
    uint64_t generation;        /**< the session's generation */
    uint64_t snapshot_ns;       /**< wall clock of the snapshot, ns since the epoch */
    uint64_t interval_start_ns; /**< wall clock of the interval's start (last report) */
    mp_prof_config config;      /**< the session's configuration */
    mp_prof_stats counters;     /**< mp_prof_diagnostics() at the snapshot */
    size_t live_samples;        /**< sampled blocks live at the snapshot */
    double live_objects;        /**< their estimated objects (inuse_objects) */
    double live_bytes;          /**< their estimated bytes (inuse_space) */
    size_t interval_stacks;     /**< stacks allocated from since the last report */
    uint64_t interval_records;  /**< samples taken on them */
    double interval_objects;    /**< their estimated objects (alloc_objects) */
    double interval_bytes;      /**< their estimated bytes (alloc_space) */
    size_t stacks;              /**< distinct stacks */
    uint64_t frames;            /**< frames over all stacks */
    uint64_t named_frames;      /**< of which code(build-id, path, offset) units */
    size_t mappings;            /**< loaded objects recorded (mp_prof_image_mapping_get) */
    bool has_peak;              /**< the image holds the window's peak (images written with it) */
    uint64_t peak_bytes;        /**< its estimated live heap at the mark (mp_prof_peak_info) */
    int64_t peak_time_ns;       /**< wall clock of the mark */
} mp_prof_image_info;

/** Fills `out` from `img`. */
MP_PROF_API void mp_prof_image_info_get(const mp_prof_image *img, mp_prof_image_info *out);

/** One loaded object the image recorded. The strings are `img`'s. */
typedef struct mp_prof_image_mapping {
    const char *path;     /**< as the writing process named it */
    const char *build_id; /**< lower-case hex, "" if none */
    bool main;            /**< the main program */
    bool loaded;          /**< loaded at the snapshot (else retained after dlclose) */
    uint64_t start;       /**< first executable address in the writing process */
    uint64_t limit;       /**< end of the last executable segment */
    size_t segments;      /**< executable segments */
} mp_prof_image_mapping;

/**
 * Mapping `i` (0 <= i < info.mappings) of `img`.
 * @return MP_PROF_OK, or MP_PROF_E_INVALID_CONFIG when `i` is out of range.
 */
MP_PROF_API mp_prof_status mp_prof_image_mapping_get(const mp_prof_image *img, size_t i,
                                                     mp_prof_image_mapping *out);

/** Where the symbols of a mapping are read from offline. */
typedef enum mp_prof_image_symbols {
    MP_PROF_IMAGE_SYMBOLS_FOUND = 0,       /**< a file with the mapping's build-id */
    MP_PROF_IMAGE_SYMBOLS_NO_FILE = 1,     /**< the mapping names no file ([vdso]) */
    MP_PROF_IMAGE_SYMBOLS_NO_BUILD_ID = 2, /**< no build-id: nothing can be checked */
    MP_PROF_IMAGE_SYMBOLS_MISSING = 3,     /**< no candidate file exists */
    MP_PROF_IMAGE_SYMBOLS_MISMATCH = 4     /**< files exist, none with the build-id */
} mp_prof_image_symbols;

/**
 * Finds the file to symbolize mapping `i` from: under `binary_path` (may
 * be NULL) `DIR/.build-id/xx/yyyy.debug`, `DIR/.build-id/xx/yyyy`, `DIR/PATH`,
 * `DIR/BASENAME`, then the mapping's own path; only a file with the
 * mapping's build-id is taken, and among those one with a .symtab first.
 * `*file` (malloc()ed, the caller frees it) is set when FOUND, else NULL;
 * `why` gets a sentence for the other outcomes (which files had which
 * build-id). An out-of-range `i` answers NO_FILE.
 */
MP_PROF_API mp_prof_image_symbols mp_prof_image_locate(const mp_prof_image *img, size_t i,
                                                       const char *binary_path, char **file,
                                                       char *why, size_t whylen);

/** Options of mp_prof_image_pprof(); all zero/NULL: the defaults. */
typedef struct mp_prof_image_pprof_opts {
    const char *binary_path; /**< also look for the mappings' files here (NULL: not) */
    int symbolize;           /**< an mp_prof_symbolize, or -1: the image's session setting */
    /** Called once per mapping whose locations could not be symbolized
     *  from a checked file (build-id mismatch, missing file, no build-id). */
    void (*note)(void *ctx, const char *line);
    void *note_ctx; /**< passed to `note` */
    /** Nonzero: instead of the snapshot, the peak of the window the image
     *  was taken in (since the last report, up to the snapshot), as
     *  mp_profiler_report_peak() gives it: in-use sample types only, size
     *  and time in the comments. MP_PROF_E_BAD_IMAGE when the image holds
     *  none (written before the peak existed). */
    int peak;
} mp_prof_image_pprof_opts;

/**
 * The image as one uncompressed pprof, as mp_profiler_report() would have
 * given it in the writing process at the snapshot: the same samples,
 * values, locations and mappings, symbolized offline from the files the
 * mappings name (checked by build-id). `opts` NULL: the image's session
 * setting, no binary path, no notes. Free `*out` with
 * mp_prof_buffer_free().
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument, or a
 *         symbolize mode out of range); otherwise what the report side
 *         answered (MP_PROF_E_NOMEM, MP_PROF_E_INTERNAL).
 */
MP_PROF_API mp_prof_status mp_prof_image_pprof(const mp_prof_image *img,
                                               const mp_prof_image_pprof_opts *opts, uint8_t **out,
                                               size_t *len);

#ifdef __cplusplus
}
#endif

#endif
