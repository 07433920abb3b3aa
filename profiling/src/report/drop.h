/* SPDX-License-Identifier: MIT */
/* Internal to the report side: which frames a report drops from the
 * leaf end of its stacks (mp_prof_set_drop_frames, drop.c), and the
 * pruning itself (prune.c). */
#ifndef MIMPROF_PROFILING_REPORT_DROP_H
#define MIMPROF_PROFILING_REPORT_DROP_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#include "builder_state.h"

/* One report's view of the process's setting: `pattern` is what the
 * profile names in drop_frames (NULL: nothing is dropped), `rx` its
 * compiled form when `ready`. */
typedef struct mp_drop {
    const char *pattern;
    bool ready;    /* something may match */
    bool defaults; /* the default set is part of pattern (drop.c's own matcher) */
    bool owned;    /* `own` holds the rest of pattern, compiled */
    regex_t own;
} mp_drop;

/* Reads the setting: the default set is matched without a regular
 * expression, a caller's addition is compiled for this report (a regex_t
 * of its own: no lock inside it is shared with other threads). */
void mp_drop_begin(mp_drop *d);

/* `d` for pattern, compiled for `d` alone (NULL: drops nothing, false);
 * false when it is not a regular expression (or out of memory): `d` then
 * matches nothing. Released by mp_drop_end. */
bool mp_drop_compile(mp_drop *d, const char *pattern);

/* Whether a name (without parameters) matches the default set. */
bool mp_drop_default_matches(const char *name);

/* Whether function `name` matches the pattern as pprof matches it: the
 * name without its parameter list, whole. */
bool mp_drop_matches(mp_drop *d, const char *name);

void mp_drop_end(mp_drop *d);

/* What a location has of the pattern (prune.c). */
typedef enum {
    MP_PRUNE_NONE,  /* no frame matches */
    MP_PRUNE_INNER, /* a frame matches, with frames written outside it */
    MP_PRUNE_WHOLE  /* its outermost written frame matches */
} mp_prune_match;

/* pprof's cut of one stack of n locations (leaf first; match(ctx, j)
 * says what location j has): how many locations go from the leaf end. */
size_t mp_prune_cut(size_t n, mp_prune_match (*match)(void *ctx, size_t j), void *ctx);

/* The builder's stacks pruned at `d` (ready): `info[i]` is location i's
 * symbolization (NULL: none); `skip[i]` (one per location) receives how
 * many of its inner frames are left out of it. Samples keep their
 * offsets into b->stk, moved past the dropped locations. False on
 * out-of-memory. */
bool mp_report_prune(mp_report_builder *b, mp_drop *d, const struct mp_pcinfo *const *info,
                     uint16_t *skip);

/* mp_prof_pprof_prune (<mimprof/profiling_pprof.h>) without the
 * recursion guard, which the caller holds: same arguments and results;
 * the buffer is malloc()ed. */
mp_prof_status mp_report_prune_pprof(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen);

#endif
