/* SPDX-License-Identifier: MIT */
/* Internal to the report side: the string table and the function table
 * of one pprof profile, each an array plus its index (../index.h). Zero-initialised tables are empty; free with
 * mp_strtab_free / mp_fntab_free. */
#ifndef MIMPROF_PROFILING_REPORT_PPROF_TABLES_H
#define MIMPROF_PROFILING_REPORT_PPROF_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "../index.h"
#include "profile.pb-c.h"

/* The profile's string table: content -> index. */
typedef struct mp_strtab {
    char **v;
    size_t n, cap;
    mp_index ix; /* the n elements */
} mp_strtab;

/* Index of `s` (NULL = ""); -1 on out-of-memory. The table keeps the
 * pointer: `s` must outlive the encoding. */
int64_t mp_strtab_idx(mp_strtab *t, const char *s);
void mp_strtab_free(mp_strtab *t);

/* Functions: (name, system name, file) string indices -> id. name is
 * the human name and system_name the linkage name (the same index for C
 * names), so the overloads a human name covers stay distinct functions. */
typedef struct mp_fntab {
    Perftools__Profiles__Function *v;
    size_t n, cap;
    mp_index ix; /* the n elements */
} mp_fntab;

/* Function id (>= 1) for (name, sys, file); 0 on out-of-memory. */
uint64_t mp_fntab_id(mp_fntab *t, int64_t name, int64_t sys, int64_t file);
void mp_fntab_free(mp_fntab *t);

#endif
