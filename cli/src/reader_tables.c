/* SPDX-License-Identifier: MIT */
/* The pprof reader's tables (reader_tables.h). */
#define _GNU_SOURCE
#include "reader_tables.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

int mpt_idmap_init(mpt_idmap *m, size_t n)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    m->mask = cap - 1;
    m->has_zero = false;
    return m->keys != NULL && m->vals != NULL ? 0 : -1;
}

void mpt_idmap_free(mpt_idmap *m)
{
    free(m->keys);
    free(m->vals);
}

int mpt_idmap_put(mpt_idmap *m, uint64_t key, uint32_t val)
{
    if (key == 0) {
        if (m->has_zero)
            return 0;
        m->has_zero = true;
        m->zero_val = val;
        return 1;
    }
    for (size_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key)
            return 0;
        if (m->keys[i] == 0) {
            m->keys[i] = key;
            m->vals[i] = val;
            return 1;
        }
    }
}

bool mpt_idmap_get(const mpt_idmap *m, uint64_t key, uint32_t *val)
{
    if (key == 0) {
        *val = m->zero_val;
        return m->has_zero;
    }
    for (size_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
        if (m->keys[i] == 0)
            return false;
    }
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int intern_grow(mpt_interner *in)
{
    size_t ncap = in->mask == 0 ? 64 : (in->mask + 1) * 2;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (ns == NULL)
        return -1;
    for (size_t k = 0; k < in->n; k++) {
        size_t i = hash_str(in->names[k]) & (ncap - 1);
        while (ns[i] != 0)
            i = (i + 1) & (ncap - 1);
        ns[i] = (uint32_t)(k + 1);
    }
    free(in->slots);
    in->slots = ns;
    in->mask = ncap - 1;
    return 0;
}

int64_t mpt_intern(mpt_interner *in, const char *s)
{
    if (in->n * 2 >= in->mask && intern_grow(in) != 0)
        return -1;
    size_t i = hash_str(s) & in->mask;
    for (; in->slots[i] != 0; i = (i + 1) & in->mask)
        if (strcmp(in->names[in->slots[i] - 1], s) == 0)
            return in->slots[i] - 1;
    if (in->n >= UINT32_MAX - 1)
        return -1;
    if (in->n == in->cap) {
        size_t ncap = in->cap ? in->cap * 2 : 64;
        char **nn = realloc(in->names, ncap * sizeof *nn);
        if (nn == NULL)
            return -1;
        in->names = nn;
        in->cap = ncap;
    }
    char *copy = strdup(s);
    if (copy == NULL)
        return -1;
    in->names[in->n] = copy;
    in->slots[i] = (uint32_t)(in->n + 1);
    return (int64_t)in->n++;
}
