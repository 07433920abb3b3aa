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
#include "../index.h"
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
 * location index < nloc; loc_ix indexes every location but the marker
 * by its return address, smp_ix every sample by its hash. */
struct mp_report_builder {
    mp_report_cache *c;
    mp_report_options opt;
    uintptr_t *loc_pc;
    size_t nloc, loc_cap;
    mp_index loc_ix;
    uint32_t marker;
    uint32_t *stk;
    size_t nstk, stk_cap;
    mp_bsample *smp;
    size_t nsmp, smp_cap;
    mp_index smp_ix;
    char **comments; /* the profile's comments, in order (mp_report_comment) */
    size_t ncomments, comments_cap;
};

#endif
