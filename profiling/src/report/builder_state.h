/* SPDX-License-Identifier: MIT */
/* Internal to the report side: the state a report builder collects
 * (builder.c) and the encoder reads (encode.c), and the process-lifetime
 * cache both use (cache.c). Nothing outside src/report includes it. */
#ifndef MIMPROF_PROFILING_REPORT_BUILDER_STATE_H
#define MIMPROF_PROFILING_REPORT_BUILDER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../hash.h"
#include "../report_builder.h"
#include "maps.h"
#include "symbols.h"

struct mp_report_cache {
    mp_maps maps;
    mp_syms *syms;
    size_t budget;
    uint64_t seen_unloads;
    int last_quality;
};

/* Location index of a builder: none (out of memory, or no marker yet). */
#define MP_NO_LOC UINT32_MAX

struct mp_loc_slot {
    uintptr_t pc;
    uint32_t idx; /* location index + 1; 0 = empty */
};

/* One aggregated sample: its stack is stk[off .. off + depth). */
typedef struct mp_bsample {
    uint64_t hash;
    size_t off;
    uint32_t depth; /* locations, the marker included */
    bool interval;
    int8_t age; /* age bucket (../age.h) of a live sample, -1 = no age label */
    double v[MP_VAL_COUNT];
} mp_bsample;

/* Invariants: loc_pc[i] is location i's return address (0 for the
 * "[truncated]" marker, whose index is `marker`); every stk entry is a
 * location index < nloc; both tables stay at most half full (open
 * addressing, capacity a power of two). */
struct mp_report_builder {
    mp_report_cache *c;
    mp_report_options opt;
    uintptr_t *loc_pc;
    size_t nloc, loc_cap;
    struct mp_loc_slot *loc_tab; /* open addressing on pc */
    size_t loc_tab_cap;
    uint32_t marker;
    uint32_t *stk;
    size_t nstk, stk_cap;
    mp_bsample *smp;
    size_t nsmp, smp_cap;
    uint64_t *smp_tab; /* (hash high 32 bits << 32) | (sample index + 1) */
    size_t smp_tab_cap;
    char **comments; /* the profile's comments, in order (mp_report_comment) */
    size_t ncomments, comments_cap;
};

/* Grows *p (elements of `elem` bytes, capacity *cap) to hold `need`,
 * doubling from 64; false on out-of-memory (*p unchanged). */
bool mp_report_reserve(void **p, size_t *cap, size_t need, size_t elem);

#endif
