/* SPDX-License-Identifier: MIT */
/* Interning (report_intern.h). FNV-1a over the key bytes, linear probing,
 * the table at most half full. */
#include <stdlib.h>
#include <string.h>

#include "report_intern.h"

static uint64_t hash(const unsigned char *k, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= k[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static int grow_slots(mpt_intern *t)
{
    size_t ncap = t->mask ? (t->mask + 1) * 2 : 1024;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t id = 0; id < t->n; id++) {
        size_t j = hash(t->arena + t->off[id], t->off[id + 1] - t->off[id]) & (ncap - 1);
        while (ns[j] != 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)(id + 1);
    }
    free(t->slots);
    t->slots = ns;
    t->mask = ncap - 1;
    return 0;
}

int64_t mpt_intern_put(mpt_intern *t, const void *key, size_t len)
{
    if ((t->n + 1) * 2 > t->mask && grow_slots(t) != 0)
        return -1;
    const unsigned char *k = key;
    size_t j = hash(k, len) & t->mask;
    for (; t->slots[j] != 0; j = (j + 1) & t->mask) {
        size_t id = t->slots[j] - 1;
        if (t->off[id + 1] - t->off[id] == len && memcmp(t->arena + t->off[id], k, len) == 0)
            return (int64_t)id;
    }
    if (t->n >= UINT32_MAX - 1)
        return -1;
    if (t->n + 2 > t->off_cap) {
        size_t nc = t->off_cap ? t->off_cap * 2 : 1024;
        size_t *no = realloc(t->off, nc * sizeof *no);
        if (no == NULL)
            return -1;
        if (t->off_cap == 0)
            no[0] = 0;
        t->off = no;
        t->off_cap = nc;
    }
    if (t->arena_len + len > t->arena_cap) {
        size_t nc = t->arena_cap ? t->arena_cap * 2 : 65536;
        while (nc < t->arena_len + len)
            nc *= 2;
        unsigned char *na = realloc(t->arena, nc);
        if (na == NULL)
            return -1;
        t->arena = na;
        t->arena_cap = nc;
    }
    if (len > 0)
        memcpy(t->arena + t->arena_len, k, len);
    t->arena_len += len;
    t->off[t->n + 1] = t->arena_len;
    t->slots[j] = (uint32_t)(t->n + 1);
    return (int64_t)t->n++;
}

void mpt_intern_free(mpt_intern *t)
{
    free(t->arena);
    free(t->off);
    free(t->slots);
    memset(t, 0, sizeof *t);
}
