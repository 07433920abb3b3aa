/* SPDX-License-Identifier: MIT */
/* The flame graph's call tree (flame_tree.h): nodes found by an
 * open-addressed table keyed by (parent, name), children kept as one
 * array per parent (CSR) sorted by name. */
#include <stdlib.h>
#include <string.h>

#include "flame_tree.h"

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    x ^= x >> 29;
    return x;
}

static int tree_grow_hash(mpt_flame_tree *t)
{
    size_t ncap = t->mask ? (t->mask + 1) * 2 : 1024;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    uint32_t *nv = calloc(ncap, sizeof *nv);
    if (nk == NULL || nv == NULL) {
        free(nk);
        free(nv);
        return -1;
    }
    for (size_t i = 0; t->keys != NULL && i <= t->mask; i++) {
        if (t->keys[i] == 0)
            continue;
        size_t j = mix(t->keys[i]) & (ncap - 1);
        while (nk[j] != 0)
            j = (j + 1) & (ncap - 1);
        nk[j] = t->keys[i];
        nv[j] = t->vals[i];
    }
    free(t->keys);
    free(t->vals);
    t->keys = nk;
    t->vals = nv;
    t->mask = ncap - 1;
    return 0;
}

static int64_t tree_child(mpt_flame_tree *t, uint32_t parent, uint32_t name)
{
    if (t->n * 2 >= t->mask && tree_grow_hash(t) != 0)
        return -1;
    uint64_t key = (((uint64_t)parent << 32) | name) + 1;
    size_t j = mix(key) & t->mask;
    for (; t->keys[j] != 0; j = (j + 1) & t->mask)
        if (t->keys[j] == key)
            return t->vals[j];
    if (t->n >= UINT32_MAX - 1)
        return -1;
    if (t->n == t->cap) {
        size_t ncap = t->cap * 2;
        mpt_flame_node *nn = realloc(t->nodes, ncap * sizeof *nn);
        if (nn == NULL)
            return -1;
        t->nodes = nn;
        t->cap = ncap;
    }
    t->nodes[t->n] = (mpt_flame_node){name, parent, 0};
    t->keys[j] = key;
    t->vals[j] = (uint32_t)t->n;
    return (int64_t)t->n++;
}

void mpt_flame_tree_free(mpt_flame_tree *t)
{
    free(t->nodes);
    free(t->keys);
    free(t->vals);
    free(t->cstart);
    free(t->child);
}

typedef struct named_child {
    const char *name;
    uint32_t node;
} named_child;

static int child_by_name(const void *a, const void *b)
{
    return strcmp(((const named_child *)a)->name, ((const named_child *)b)->name);
}

int mpt_flame_tree_build(mpt_flame_tree *t, const mpt_profile *p, size_t type)
{
    memset(t, 0, sizeof *t);
    t->cap = 1024;
    t->nodes = malloc(t->cap * sizeof *t->nodes);
    if (t->nodes == NULL || tree_grow_hash(t) != 0)
        return -1;
    t->nodes[0] = (mpt_flame_node){UINT32_MAX, UINT32_MAX, 0};
    t->n = 1;
    for (size_t s = 0; s < p->nsamples; s++) {
        int64_t v = p->values[s * p->ntypes + type];
        if (v <= 0)
            continue;
        t->nodes[0].value = mpt_sat_add(t->nodes[0].value, v);
        uint32_t cur = 0;
        for (size_t i = p->stack_off[s + 1]; i > p->stack_off[s]; i--) {
            int64_t c = tree_child(t, cur, p->frames[i - 1]);
            if (c < 0)
                return -1;
            cur = (uint32_t)c;
            t->nodes[cur].value = mpt_sat_add(t->nodes[cur].value, v);
        }
    }
    /* Children lists (CSR), each sorted by name. */
    t->cstart = calloc(t->n + 2, sizeof *t->cstart);
    t->child = malloc((t->n + 1) * sizeof *t->child);
    if (t->cstart == NULL || t->child == NULL)
        return -1;
    for (size_t i = 1; i < t->n; i++)
        t->cstart[t->nodes[i].parent + 2]++;
    for (size_t i = 2; i < t->n + 2; i++)
        t->cstart[i] += t->cstart[i - 1];
    for (size_t i = 1; i < t->n; i++)
        t->child[t->cstart[t->nodes[i].parent + 1]++] = (uint32_t)i;
    named_child *tmp = malloc((t->n + 1) * sizeof *tmp);
    if (tmp == NULL)
        return -1;
    for (size_t i = 0; i < t->n; i++) {
        size_t a = t->cstart[i], b = t->cstart[i + 1];
        if (b - a < 2)
            continue;
        for (size_t c = a; c < b; c++)
            tmp[c - a] = (named_child){p->names[t->nodes[t->child[c]].name], t->child[c]};
        qsort(tmp, b - a, sizeof *tmp, child_by_name);
        for (size_t c = a; c < b; c++)
            t->child[c] = tmp[c - a].node;
    }
    free(tmp);
    return 0;
}
