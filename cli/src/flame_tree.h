/* SPDX-License-Identifier: MIT */
/* The call tree of a flame graph: a profile's stacks merged from the
 * root, one node per (parent, function), each with the sum of its
 * samples' values of one type, and each node's children sorted by name
 * (flame.c draws them in that order). Internal to the command. */
#ifndef MIMPROF_CLI_FLAME_TREE_H
#define MIMPROF_CLI_FLAME_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "pprof_reader.h"

typedef struct mpt_flame_node {
    uint32_t name; /* interned id; UINT32_MAX = the root "all" */
    uint32_t parent;
    int64_t value; /* saturating sum of the values of the samples through it */
} mpt_flame_node;

typedef struct mpt_flame_tree {
    mpt_flame_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    uint64_t *keys; /* (parent << 32 | name) + 1; 0 = empty */
    uint32_t *vals;
    size_t mask;
    size_t *cstart; /* children of node i: child[cstart[i] .. cstart[i+1]) */
    uint32_t *child;
} mpt_flame_tree;

/* Builds the tree of value type `type` of `p` (samples with a value <= 0
 * are left out). 0, or -1 when out of memory: then call
 * mpt_flame_tree_free all the same. */
int mpt_flame_tree_build(mpt_flame_tree *t, const mpt_profile *p, size_t type);

/* Releases what mpt_flame_tree_build allocated. */
void mpt_flame_tree_free(mpt_flame_tree *t);

#endif
