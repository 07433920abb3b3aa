/* SPDX-License-Identifier: MIT */
/* Open-addressing map from a 64-bit key to an index (see u64map.h). */
#include "u64map.h"

#include <stdlib.h>

uint64_t mp_pyro_u64_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu;
    x ^= x >> 33;
    return x;
}

static int map_grow(mp_pyro_u64map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 256;
    uint64_t *k = calloc(cap, sizeof *k);
    size_t *v = calloc(cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->vals[i])
            continue;
        size_t j = mp_pyro_u64_mix(m->keys[i]) & (cap - 1);
        while (v[j])
            j = (j + 1) & (cap - 1);
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = k;
    m->vals = v;
    m->cap = cap;
    return 0;
}

size_t *mp_pyro_u64map_slot(mp_pyro_u64map *m, uint64_t key, bool *found)
{
    if ((m->len + 1) * 2 > m->cap && map_grow(m) != 0)
        return NULL;
    size_t j = mp_pyro_u64_mix(key) & (m->cap - 1);
    while (m->vals[j] && m->keys[j] != key)
        j = (j + 1) & (m->cap - 1);
    *found = m->vals[j] != 0;
    m->keys[j] = key;
    return &m->vals[j];
}

void mp_pyro_u64map_free(mp_pyro_u64map *m)
{
    free(m->keys);
    free(m->vals);
}
