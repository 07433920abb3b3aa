/* SPDX-License-Identifier: MIT */
/* Internal to `mimprof report`: the moments of the page's data, shared by
 * their builder (report_data.c) and their writer (report_json.c). */
#ifndef MIMPROF_CLI_REPORT_DATA_H
#define MIMPROF_CLI_REPORT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "report_intern.h"

/* What a moment is: a report, a window's peak, a threshold report. */
enum { KIND_REPORT = 'r', KIND_PEAK = 'p', KIND_ABOVE = 'a' };

typedef struct entry {
    uint32_t stack; /* global stack id */
    int64_t age;    /* seconds of the age label, -1 without one */
    int64_t value;  /* inuse_space */
} entry;

typedef struct pair {
    int64_t key, value;
} pair;

typedef struct top_row {
    uint32_t name;
    int64_t flat, cum;
} top_row;

typedef struct moment {
    char *file;
    char *why; /* a threshold report's "report-above: ..." comment */
    char kind;
    int64_t t_ns;                  /* when the snapshot was taken */
    int64_t dur_ns;                /* the interval the allocation samples cover, 0 if unknown */
    int64_t total, objects, alloc; /* alloc: -1 without alloc_space */
    mpt_report_mem mem;
    pair *sites; /* (global site id, value), every site of the moment */
    size_t nsites;
    entry *kept;
    size_t nkept;
    int64_t other; /* the merged rest of the entries */
    size_t nother; /* how many entries were merged */
    pair *ages;    /* (age seconds or -1, value), sorted by age */
    size_t nages;
    top_row *top;
    size_t ntop;
} moment;

struct mpt_report_data {
    mpt_report_opts o;
    mpt_intern names, stacks, sites;
    moment *m;
    size_t n, cap;
    char **skip_file, **skip_why;
    size_t nskip;
};

/* Orders pairs by key (report_data.c). */
int mpt_report_pair_by_key(const void *a, const void *b);

#endif
