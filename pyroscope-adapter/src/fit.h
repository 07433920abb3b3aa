/* SPDX-License-Identifier: MIT */
/* Shaping a backend's pprof into what every supported Pyroscope server
 * keeps in full. Not installed.
 *
 *  - The `__delta__` sample label is removed and samples with the same
 *    stack and remaining labels are merged (values summed). The series
 *    label `__delta__="false"` already disables server-side delta; the
 *    sample label made 1.13/1.14 split the profile by labels and lose
 *    every labelled sample whose stack had no unlabelled twin (a stack
 *    whose objects were all freed by report time).
 *  - mimprof's numeric `age` label (one in-use sample per stack and age
 *    bucket) is removed too and the buckets merged back into one sample
 *    per stack: Pyroscope keeps no numeric sample label that a query
 *    could filter by, so the buckets would only multiply the samples
 *    counted against the server's per-profile limits (up to 16 per
 *    stack) for nothing; ages stay in the files, heap images and
 *    `mimprof top` (README, "Ages and Pyroscope").
 *  - The result is cut into parts that each hold at most `max_samples`
 *    samples and at most `max_bytes` bytes encoded: every sample goes to
 *    exactly one part with the locations, functions and mappings it
 *    references (the string table is copied whole), so the parts together
 *    hold every value exactly once. Pyroscope sums the profiles of a
 *    series within a query's time range, so queries see the report's
 *    totals, as long as no two parts share a millisecond (it keeps one
 *    profile per series and millisecond): each part gets its own time
 *    from the caller's stamp function. */
#ifndef MP_PYRO_FIT_H
#define MP_PYRO_FIT_H

#include <stddef.h>
#include <stdint.h>

#include <mimprof/pyroscope.h>

typedef struct mp_pyro_part {
    uint8_t *pprof; /* malloc()ed, uncompressed */
    size_t len;
    size_t samples;
} mp_pyro_part;

typedef struct mp_pyro_parts {
    mp_pyro_part *v;
    size_t n;
} mp_pyro_parts;

/* The time of each part (stamp.h): `stamp(ctx, part, peak_ns)` returns
 * part `part`'s time_nanos; `peak_ns` is the instant a peak profile
 * describes (its "peak: time_nanos=N" comment, as the profiler writes it),
 * 0 for any other profile. */
typedef struct mp_pyro_fit_stamp {
    int64_t (*stamp)(void *ctx, size_t part, int64_t peak_ns);
    void *ctx;
} mp_pyro_fit_stamp;

/* 0 for a bound means none. `stamp` NULL keeps the profile's own
 * time_nanos in every part. MP_PYRO_E_INVALID_ARGUMENT with a sentence in
 * `err` when `in` is not a pprof Profile or one stack alone exceeds the
 * bounds; MP_PYRO_E_NOMEM. */
mp_pyro_status mp_pyro_fit(const uint8_t *in, size_t len, size_t max_samples, size_t max_bytes,
                           const mp_pyro_fit_stamp *stamp, mp_pyro_parts *out, char *err,
                           size_t errlen);
void mp_pyro_parts_free(mp_pyro_parts *p);

#endif
