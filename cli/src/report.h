/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command: `mimprof report`, one self-contained
 * HTML page of a run (its reports, peaks and threshold reports over time).
 *
 *   report_cmd.c    options, the input files, the choice of process
 *   report_data.c   the run's data: moments with exact totals, reduced
 *   report_json.c   ... written as the page's JSON document
 *   report_intern.c interning of names, stacks and sites (ids)
 *   report_html.c   the page: the template (cli/src/report/, embedded at
 *                   build time by report/embed.py) with the data in it
 *
 * Reduction (the page stays small for a week of reports): per moment the
 * `stacks` largest (stack, age) entries are kept and the rest merged into
 * one "[N other stacks]" entry; the heap-over-time chart keeps the `sites`
 * sites (the innermost `site_frames` frames) with the largest value at any
 * moment, the rest one band; the top table keeps `top_rows` functions.
 * Every total (in-use bytes and objects, allocated bytes, per-age sums,
 * the bands, each function's flat and cum) is computed over all samples
 * before anything is dropped, so totals stay exact. */
#ifndef MIMPROF_CLI_REPORT_H
#define MIMPROF_CLI_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pprof_reader.h"

typedef struct mpt_report_opts {
    size_t sites;         /* bands of the heap chart; default 12 */
    unsigned site_frames; /* frames that name a site; default 1 (the function) */
    size_t stacks;        /* (stack, age) entries kept per moment; default 400 */
    size_t top_rows;      /* functions of the top table per moment; default 50 */
} mpt_report_opts;

void mpt_report_opts_init(mpt_report_opts *o);

/* One process found in the inputs (named by the file names
 * heap.<pid>.<seq>...; pid 0: files named otherwise). */
typedef struct mpt_report_proc {
    long pid;
    char program[64]; /* the main binary's base name, from its first good file */
    size_t nfiles;
    int64_t max_bytes; /* the largest RSS (or in-use total without one) of its files */
} mpt_report_proc;

typedef struct mpt_report_data mpt_report_data;

mpt_report_data *mpt_report_data_new(const mpt_report_opts *o);
void mpt_report_data_free(mpt_report_data *d);

/* Adds one file's profile as a moment (a report, a window's peak, or a
 * threshold report, told by its comments). mtime_ns stands for its time
 * when the profile has none. -1 with err set when the profile has no
 * inuse_space (it is then not added); -2 when out of memory. */
int mpt_report_data_add(mpt_report_data *d, const mpt_profile *p, const char *file,
                        int64_t mtime_ns, char *err, size_t errlen);

/* A file that was not used, and why (named on the page). */
int mpt_report_data_skip(mpt_report_data *d, const char *file, const char *why);

/* The page's data as JSON (safe inside <script>: no "<" is written).
 * `procs` are all the processes of the inputs, `chosen` the one shown.
 * -1 on out-of-memory or write error. */
int mpt_report_data_write(mpt_report_data *d, FILE *out, const mpt_report_proc *procs,
                          size_t nprocs, size_t chosen);

/* The memory figures of a mimprof report's comments ("memory rss: N
 * bytes", "memory allocator: NAME k=v ...", "memory live heap: ...",
 * "memory profiler: ..."); -1 for each not found. */
typedef struct mpt_report_mem {
    int64_t rss, resident, committed, live, profiler;
    char allocator[32];
} mpt_report_mem;

void mpt_report_mem_parse(const mpt_profile *p, mpt_report_mem *m);

/* Writes the page with `json` (NUL-terminated) as its data. -1 on write error. */
int mpt_report_html_write(FILE *out, const char *json, size_t len);

/* `mimprof report`. */
int mpt_cmd_report(int argc, char **argv);

/* Writes the page of the reports in `dir` written since `since_ns`
 * (CLOCK_REALTIME; older runs' files in the same directory are left out)
 * to `out`, for the process with the most memory (mimprof run
 * --report-page). 0, or -1 with the reason on stderr. */
int mpt_report_dir_page(const char *dir, int64_t since_ns, const char *out);

#endif
