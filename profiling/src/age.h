/* SPDX-License-Identifier: MIT */
/* Age buckets of live samples (see age.c): how a live sample's allocation
 * time becomes the pprof numeric label `age` (unit "seconds") of the
 * in-use sample it is summed into. Not installed. */
#ifndef MIMPROF_PROFILING_AGE_H
#define MIMPROF_PROFILING_AGE_H

#include <stdint.h>

/* Number of age buckets; a stack's in-use values are split into at most
 * this many pprof samples. */
#define MP_AGE_BUCKETS 16u
/* The bucket of a sample whose age is unknown (allocation samples, heap
 * images of schema 1): no `age` label. */
#define MP_AGE_NONE 0xffu

/* The bucket of an object `age_ns` nanoseconds old. */
unsigned mp_age_bucket(uint64_t age_ns);
/* The label value of bucket b (its lower bound, whole seconds). */
int64_t mp_age_bucket_seconds(unsigned b);

#endif
