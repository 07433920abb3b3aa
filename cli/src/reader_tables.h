/* SPDX-License-Identifier: MIT */
/* Internal to the pprof reader: an id -> index map (pprof ids are
 * arbitrary 64-bit numbers) and a string interner (one id per distinct
 * function name). Both open addressing, at most half full. */
#ifndef MIMPROF_CLI_READER_TABLES_H
#define MIMPROF_CLI_READER_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mpt_idmap {
    uint64_t *keys; /* 0 = empty slot; id 0 is stored in zero_val */
    uint32_t *vals;
    size_t mask;
    bool has_zero;
    uint32_t zero_val;
} mpt_idmap;

/* Sized for n keys; 0, or -1 on out-of-memory. */
int mpt_idmap_init(mpt_idmap *m, size_t n);
void mpt_idmap_free(mpt_idmap *m);
/* 1 inserted, 0 duplicate (the first value stays). */
int mpt_idmap_put(mpt_idmap *m, uint64_t key, uint32_t val);
bool mpt_idmap_get(const mpt_idmap *m, uint64_t key, uint32_t *val);

typedef struct mpt_interner {
    char **names;
    size_t n, cap;
    uint32_t *slots; /* index + 1; 0 = empty */
    size_t mask;
} mpt_interner;

/* Returns the id of `s`, copying it when new; -1 on out-of-memory.
 * Zero-initialised: empty. The caller owns names[] and frees each. */
int64_t mpt_intern(mpt_interner *in, const char *s);

#endif
