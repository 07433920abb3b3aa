/* SPDX-License-Identifier: MIT */
/* Interning for `mimprof report` (report.h): byte strings (names, stacks
 * as arrays of name ids, sites) to dense ids 0, 1, 2, ... in the order
 * first seen, by an open-addressed table over one key arena. */
#ifndef MIMPROF_CLI_REPORT_INTERN_H
#define MIMPROF_CLI_REPORT_INTERN_H

#include <stddef.h>
#include <stdint.h>

typedef struct mpt_intern {
    unsigned char *arena; /* the keys, back to back */
    size_t arena_len, arena_cap;
    size_t *off; /* key i is arena[off[i] .. off[i + 1]) */
    size_t n, off_cap;
    uint32_t *slots; /* id + 1; 0 = empty */
    size_t mask;
} mpt_intern;

/* The id of `key` (len bytes), added when new; -1 when out of memory. */
int64_t mpt_intern_put(mpt_intern *t, const void *key, size_t len);

/* Key `id` and its length. */
static inline const void *mpt_intern_key(const mpt_intern *t, size_t id, size_t *len)
{
    *len = t->off[id + 1] - t->off[id];
    return t->arena + t->off[id];
}

void mpt_intern_free(mpt_intern *t);

#endif
