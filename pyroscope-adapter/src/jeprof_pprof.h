/* SPDX-License-Identifier: MIT */
/* A parsed jemalloc heap dump as pprof inuse_objects/inuse_space, built
 * by the profiling library's foreign-stack builder
 * (<mimprof/profiling_pprof.h>), so that frames get the mimprof backend's
 * symbols, mappings and names. Not installed. */
#ifndef MP_PYRO_JEPROF_PPROF_H
#define MP_PYRO_JEPROF_PPROF_H

#include <stdint.h>

#include <mimprof/profiling_pprof.h>

#include "jeprof_parse.h"

typedef struct mp_jeprof_pprof_options {
    uintptr_t allocator_code;    /* an address in jemalloc's object: its leading frames are
                                    cut (0, or jemalloc linked into the program: none) */
    mp_prof_symbolize symbolize; /* NONE or FUNCTIONS */
    int64_t time_nanos, duration_nanos;
    const char *comment; /* NULL = none */
} mp_jeprof_pprof_options;

/* Unbiases every stack once (mp_jeprof_unbias), drops the stacks whose
 * values both round to zero, and builds the profile over `s` (this
 * process's objects, or the mappings it was given). `*out` is freed with
 * mp_prof_buffer_free(). Returns the builder's status. */
mp_prof_status mp_jeprof_pprof(const mp_jeprof_dump *d, mp_prof_symbolizer *s,
                               const mp_jeprof_pprof_options *o, uint8_t **out, size_t *len);

/* The same from the dump's text (`textlen` bytes): parses it
 * (mp_jeprof_parse) and builds the profile. MP_PROF_E_INVALID_CONFIG with
 * the parser's sentence in `err` when the text is refused. */
mp_prof_status mp_jeprof_pprof_text(const char *text, size_t textlen, mp_prof_symbolizer *s,
                                    const mp_jeprof_pprof_options *o, uint8_t **out, size_t *len,
                                    char *err, size_t errlen);

#endif
