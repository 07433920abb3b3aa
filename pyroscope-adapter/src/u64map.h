/* SPDX-License-Identifier: MIT */
/* Open-addressing map from a 64-bit key to an index (+1; 0 = empty),
 * shared by the pprof encoder and the profile fitter. Not installed. */
#ifndef MP_PYRO_U64MAP_H
#define MP_PYRO_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mp_pyro_u64map {
    uint64_t *keys;
    size_t *vals;
    size_t cap, len; /* the caller counts len when it fills an empty slot */
} mp_pyro_u64map;

/* A 64-bit finalizer (murmur3's), also for callers that hash their keys. */
uint64_t mp_pyro_u64_mix(uint64_t x);

/* Slot of `key`; *found says whether it holds it. NULL on OOM. */
size_t *mp_pyro_u64map_slot(mp_pyro_u64map *m, uint64_t key, bool *found);
void mp_pyro_u64map_free(mp_pyro_u64map *m);

#endif
