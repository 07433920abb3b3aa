/* SPDX-License-Identifier: MIT */
/* Internal to the report side (and its tests/benchmarks): knobs and views
 * of mp_report_cache that the recorder does not need. */
#ifndef MIMPROF_PROFILING_REPORT_INTERNAL_H
#define MIMPROF_PROFILING_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "../report_builder.h"
#include "maps.h"

/* Default bound on symbol data (mp_report_cache_symbol_bytes): past it,
 * caches are dropped between reports and rebuilt on demand. */
#define MP_REPORT_SYMBOL_BUDGET ((size_t)64 << 20)

void mp_report_cache_set_budget(mp_report_cache *c, size_t bytes);

/* The cached mappings (refreshed by mp_report_begin or explicitly). */
mp_maps *mp_report_cache_maps(mp_report_cache *c);
bool mp_report_cache_refresh(mp_report_cache *c);

#endif
