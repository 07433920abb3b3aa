/* SPDX-License-Identifier: MIT */
/* A parsed jemalloc heap dump -> pprof inuse_objects/inuse_space.
 * Not installed. */
#ifndef MP_PYRO_PPROF_HEAP_H
#define MP_PYRO_PPROF_HEAP_H

#include <stdbool.h>

#include <mimprof/pyroscope.h>

#include "jeprof_parse.h"
#include "mappings.h"

typedef struct mp_pyro_heap_options {
    const mp_pyro_mapping *maps; /* sorted by start */
    size_t nmaps;
    int skip_object; /* leading frames in this object are jemalloc's own; -1 = none */
    bool symbolize;  /* dladdr names for exported symbols */
    int64_t time_nanos, duration_nanos;
    const char *comment; /* NULL = none */
} mp_pyro_heap_options;

/* Unbiases every stack once (mp_jeprof_unbias), rounds once, and encodes.
 * Frame addresses are return addresses: each is moved back by one byte
 * into its call instruction (as pprof's own legacy heap parser does).
 * `*out` is malloc()ed. */
mp_pyro_status mp_pyro_heap_pprof(const mp_jeprof_dump *d, const mp_pyro_heap_options *o,
                                  uint8_t **out, size_t *len);

#endif
