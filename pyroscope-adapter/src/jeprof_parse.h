/* SPDX-License-Identifier: MIT */
/* Parser of jemalloc's heap profile dump ("heap_v2", what
 * mallctl("prof.dump") writes) and jeprof's unbiasing rule.
 * Pure: no I/O, bounded allocation; fuzzed (fuzz/fuzz_jeprof_parse.c).
 * Not installed. */
#ifndef MP_PYRO_JEPROF_PARSE_H
#define MP_PYRO_JEPROF_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define MP_JEPROF_MAX_DEPTH 1024

typedef struct mp_jeprof_stack {
    size_t frame_off;                 /* first frame in mp_jeprof_dump.frames */
    size_t depth;                     /* frames, innermost first, as jemalloc wrote them */
    uint64_t objs, bytes;             /* "t*:" current (as written) */
    uint64_t accum_objs, accum_bytes; /* "[a: b]" (prof_accum only) */
} mp_jeprof_stack;

typedef struct mp_jeprof_dump {
    uint64_t period; /* heap_v2/<period> = 2^lg_prof_sample */
    uint64_t total_objs, total_bytes, total_accum_objs, total_accum_bytes;
    mp_jeprof_stack *stacks;
    size_t nstacks;
    uint64_t *frames;
    size_t nframes;
} mp_jeprof_dump;

/* Parses `len` bytes (not necessarily NUL-terminated). Returns 0, or -1
 * with a sentence in `err` (out is then empty). Lines after
 * "MAPPED_LIBRARIES:" are ignored. */
int mp_jeprof_parse(const char *buf, size_t len, mp_jeprof_dump *out, char *err, size_t errlen);
void mp_jeprof_dump_free(mp_jeprof_dump *d);

/* jeprof's heap_v2 unbiasing of one stack: with r = bytes/objs,
 * scale = 1 / (1 - exp(-r/period)), objs*scale and bytes*scale.
 * jemalloc >= 5.3 writes its dumps so that this rule, applied once,
 * yields its internal per-allocation unbiased estimate (prof_unbias);
 * older versions write raw sampled counts, for which it is jeprof's
 * classic average-size estimate. Zero in, zero out. */
void mp_jeprof_unbias(uint64_t objs, uint64_t bytes, uint64_t period, double *u_objs,
                      double *u_bytes);

#endif
