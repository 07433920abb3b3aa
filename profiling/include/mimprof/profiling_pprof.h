/* SPDX-License-Identifier: MIT */
/**
 * @file profiling_pprof.h
 * pprof from stacks someone else captured (foreign stacks): return
 * addresses and values per sample in, the same profile bytes
 * mp_profiler_report() writes out -- the same symbolizer (ELF symbols,
 * DWARF lines with libdw), the same mappings (dl_iterate_phdr with GNU
 * build-ids, or the ones given), the same names (Function.name demangled
 * and qualified, Function.system_name the linkage name) and the same
 * encoder. The Pyroscope adapter's jemalloc backend turns jemalloc's heap
 * dumps into pprof with it, so that both backends name frames alike.
 *
 * Usage:
 *
 *     mp_prof_symbolizer *s;                 // kept across profiles
 *     mp_prof_symbolizer_new(&s);
 *     mp_prof_pprof_options o;
 *     mp_prof_pprof_options_init(&o);
 *     o.period = 4096;
 *     mp_prof_pprof *p;
 *     mp_prof_pprof_begin(s, &o, &p);
 *     double v[2] = {objects, bytes};        // inuse_objects, inuse_space
 *     mp_prof_pprof_add(p, pcs, depth, v, 2);
 *     uint8_t *pb; size_t len;
 *     mp_prof_pprof_finish(p, &pb, &len);    // uncompressed pprof
 *     mp_prof_buffer_free(pb);
 *     mp_prof_symbolizer_free(s);
 *
 * Threading: a symbolizer and the profiles begun on it are used by one
 * thread at a time. Nothing here may be called from an allocation hook
 * (reading the loaded objects takes the loader's lock); the calls hold the
 * profiler's recursion guard, so their own allocations are never sampled.
 * None of them needs a session.
 */
#ifndef MIMPROF_PROFILING_PPROF_H
#define MIMPROF_PROFILING_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The address space stacks come from, with its symbols cached across
 *  profiles (opaque): this process's loaded objects, re-read when the
 *  loader's list changes, or the mappings given with
 *  mp_prof_symbolizer_add_mapping(). */
typedef struct mp_prof_symbolizer mp_prof_symbolizer;

/**
 * Creates a symbolizer of this process's address space.
 * @param out receives the symbolizer (free it with mp_prof_symbolizer_free())
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL `out`), MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_symbolizer_new(mp_prof_symbolizer **out);

/** One mapping of another address space, for mp_prof_symbolizer_add_mapping(). */
typedef struct mp_prof_mapping {
    uint64_t start;       /**< first address of the executable segment (page-aligned) */
    uint64_t limit;       /**< one past its last address */
    uint64_t file_offset; /**< offset of `start` in the file (page-aligned); the load
                               bias is start minus the address of the PT_LOAD segment at
                               that offset, read from the file's program headers, or
                               start - file_offset when the file cannot be read */
    const char *path;     /**< the object's file (copied); symbols are read from it
                               when it is an absolute path */
    const char *build_id; /**< lower-case hex GNU build-id (copied), "" or NULL when none */
} mp_prof_mapping;

/**
 * Adds a mapping of another address space (another process's, a file's):
 * from then on the symbolizer describes that space, never this process's.
 * Mappings are given before the first profile is begun on `s`; their ids
 * follow the order of the calls.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument, empty range,
 *         a range that overlaps one added before, a build-id longer than
 *         128 hex digits, a profile of this process's objects was begun
 *         on `s` already), MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_symbolizer_add_mapping(mp_prof_symbolizer *s,
                                                          const mp_prof_mapping *m);

/** Frees a symbolizer (NULL is ignored). Every profile begun on it must be
 *  finished or aborted before. */
MP_PROF_API void mp_prof_symbolizer_free(mp_prof_symbolizer *s);

/** How one profile is built; start from mp_prof_pprof_options_init(). */
typedef struct mp_prof_pprof_options {
    uint64_t period;             /**< the sampling period in bytes (period type space/bytes);
                                      default 0 */
    int64_t time_nanos;          /**< wall-clock start of the profile; default 0 */
    int64_t duration_nanos;      /**< its length; default 0 */
    mp_prof_symbolize symbolize; /**< default MP_PROF_SYMBOLIZE_FUNCTIONS */
    /** true (default): two sample types, inuse_objects/count and
     *  inuse_space/bytes; false: four, alloc_objects/count,
     *  alloc_space/bytes, inuse_objects/count, inuse_space/bytes. */
    bool inuse_only;
    /** A code address of a loaded object whose frames are not the
     *  application's (an allocator's): the innermost frames of each sample
     *  that lie in that object are dropped, unless all of them do. 0
     *  (default), an address in no mapping or in the main program: nothing
     *  is dropped. */
    uintptr_t cut_object_of;
} mp_prof_pprof_options;

/** Fills `o` with the defaults. */
MP_PROF_API void mp_prof_pprof_options_init(mp_prof_pprof_options *o);

/** One profile being built (opaque). */
typedef struct mp_prof_pprof mp_prof_pprof;

/**
 * Begins a profile over symbolizer `s` (this process's objects are re-read
 * here if the loader's list changed).
 * @return MP_PROF_OK and `*out`; MP_PROF_E_INVALID_CONFIG (NULL argument,
 *         symbolize out of range), MP_PROF_E_UNSUPPORTED (symbolize is
 *         MP_PROF_SYMBOLIZE_LINES in a build without libdw),
 *         MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_pprof_begin(mp_prof_symbolizer *s,
                                               const mp_prof_pprof_options *o, mp_prof_pprof **out);

/**
 * Adds one sample. Samples with equal stacks are summed; values are
 * rounded once, when the profile is finished.
 * @param p       the profile
 * @param pcs     the stack, innermost first: return addresses (each is
 *                moved back by one byte, into its call instruction, for
 *                the Location address), as backtrace() and jemalloc's
 *                heap dumps give them
 * @param depth   number of addresses
 * @param values  one value per sample type, in sample-type order
 * @param nvalues 2 with inuse_only, else 4
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument, wrong
 *         nvalues, depth over UINT32_MAX - 1), MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_pprof_add(mp_prof_pprof *p, const uintptr_t *pcs, size_t depth,
                                             const double *values, size_t nvalues);

/** Appends a comment (copied) to the profile's comments, in call order.
 *  @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument), MP_PROF_E_NOMEM. */
MP_PROF_API mp_prof_status mp_prof_pprof_comment(mp_prof_pprof *p, const char *text);

/**
 * Symbolizes and encodes the profile, and frees `p` in every case.
 * @param p   the profile
 * @param out receives the uncompressed pprof (free it with mp_prof_buffer_free())
 * @param len receives its length
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument),
 *         MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_pprof_finish(mp_prof_pprof *p, uint8_t **out, size_t *len);

/** Drops a profile without encoding it (NULL is ignored). */
MP_PROF_API void mp_prof_pprof_abort(mp_prof_pprof *p);

/**
 * Applies a profile's own `drop_frames` to its stacks, as `go tool pprof`
 * does on reading it (and as mp_profiler_report() does while encoding, see
 * mp_prof_set_drop_frames()): for a profile written without names and
 * named afterwards (the `mimprof` collector names its processes' reports
 * this way). Locations no stack references any more are left out; the
 * rest of the profile is unchanged.
 * @param in     an uncompressed pprof
 * @param len    its length
 * @param out    receives the pruned pprof (free it with mp_prof_buffer_free());
 *               a copy of `in` when it has no drop_frames
 * @param outlen receives its length
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL argument, not a
 *         pprof, or a drop_frames that is not a regular expression here);
 *         MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_pprof_prune(const uint8_t *in, size_t len, uint8_t **out,
                                               size_t *outlen);

#ifdef __cplusplus
}
#endif

#endif
