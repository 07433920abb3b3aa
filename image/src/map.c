/* SPDX-License-Identifier: MIT */
/* Linear probing over a power-of-two table; grows at half full. */
#include "map.h"

#include <stdlib.h>

static size_t slot_of(uint64_t a, uint64_t b, size_t cap)
{
    uint64_t h = a * UINT64_C(0x9E3779B97F4A7C15) ^ (b + UINT64_C(0x632BE59BD9B4E019));
    h ^= h >> 29;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    h ^= h >> 32;
    return (size_t)h & (cap - 1);
}

static int rehash(struct img_map *m, size_t cap)
{
    struct img_map_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].used)
            continue;
        size_t j = slot_of(m->slots[i].a, m->slots[i].b, cap);
        while (s[j].used)
            j = (j + 1) & (cap - 1);
        s[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = s;
    m->cap = cap;
    return 0;
}

uint64_t *img_map_put(struct img_map *m, uint64_t a, uint64_t b, uint64_t init, int *inserted)
{
    if ((m->n + 1) * 2 > m->cap && rehash(m, m->cap ? m->cap * 2 : 64))
        return NULL;
    size_t j = slot_of(a, b, m->cap);
    while (m->slots[j].used) {
        if (m->slots[j].a == a && m->slots[j].b == b) {
            *inserted = 0;
            return &m->slots[j].val;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->slots[j] = (struct img_map_slot){a, b, init, 1};
    m->n++;
    *inserted = 1;
    return &m->slots[j].val;
}

uint64_t *img_map_get(const struct img_map *m, uint64_t a, uint64_t b)
{
    if (!m->cap)
        return NULL;
    size_t j = slot_of(a, b, m->cap);
    while (m->slots[j].used) {
        if (m->slots[j].a == a && m->slots[j].b == b)
            return &m->slots[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void img_map_free(struct img_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
