/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command: the subcommands and the views they
 * print, as functions the tests and the fuzzer can call directly. */
#ifndef MIMPROF_TOOL_VIEWS_H
#define MIMPROF_TOOL_VIEWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pprof_reader.h"

/* Subcommands: argv[0] is the subcommand name; the return value is the
 * process exit status. */
int mpt_cmd_top(int argc, char **argv);
int mpt_cmd_flame(int argc, char **argv);
int mpt_cmd_diff(int argc, char **argv);
int mpt_cmd_run(int argc, char **argv);
int mpt_cmd_ctl(int argc, char **argv);
/* `image pprof|top|diff|info` (image_cmd.c): heap images. */
int mpt_cmd_image(int argc, char **argv);

/* Prints the usage of a subcommand ("top", "flame", "diff", "run") or of
 * the command (NULL). */
void mpt_usage(FILE *out, const char *cmd);

/* Says in one line on stderr why the getopt_long() loop of subcommand
 * `cmd` (its optstring beginning with ':') stopped at `arg`, the word
 * argv[optind - 1]: for c ':' an option without its value, for any other
 * c an unknown option. The caller returns its usage status. */
void mpt_usage_bad_option(const char *cmd, int c, const char *arg);

/* Exit statuses of the reader subcommands. */
enum { MPT_EXIT_OK = 0, MPT_EXIT_FAIL = 1, MPT_EXIT_USAGE = 2 };

/* The options of the table views `top` and `diff` (--type/-t, -n, --cum,
 * --older-than, --younger-than, --age (top: ages != NULL), --no-demangle,
 * --help) into *type, *n, *cum, *ages and lim; `cmd` names the subcommand
 * in messages. Returns -1 to go on (optind at the first operand), else the
 * exit status (usage printed, or an error said in one line). */
int mpt_parse_table_opts(const char *cmd, int argc, char **argv, const char **type, size_t *n,
                         bool *cum, bool *ages, mpt_limits *lim);

/* getopt codes of --older-than and --younger-than, and their parser:
 * the value of option c into lim (ages.h); -1 to go on, else the exit
 * status (the error said in one line). */
enum { MPT_OPT_OLDER = 0x100, MPT_OPT_YOUNGER = 0x101 };
int mpt_parse_age_opt(const char *cmd, int c, const char *arg, mpt_limits *lim);

/* `top`: the n functions with the largest flat (or cum) value of type t.
 * n == 0 prints all. `ages`: a column with the median age of each
 * function's cum memory (ages.h). A mimprof report's memory
 * reconciliation (its "memory ..." comments) heads the table. */
int mpt_top_print(FILE *out, const mpt_profile *p, size_t t, size_t n, bool by_cum, bool ages);

/* `diff`: what grew and shrank per function between base and new for the
 * sample type `type` (NULL: inuse_space when both have it, else new's
 * default). n rows per section (0 = all). Returns -1 with err set when
 * the type is missing or the units differ. */
int mpt_diff_print(FILE *out, const mpt_profile *base, const mpt_profile *cur, const char *type,
                   size_t n, bool by_cum, char *err, size_t errlen);

typedef struct mpt_flame_opts {
    const char *title; /* NULL: "Flame graph: <type>" */
    unsigned width;    /* image width in px; default 1200 */
    double min_width;  /* siblings narrower than this (px) merge; default 1.0 */
} mpt_flame_opts;

void mpt_flame_opts_init(mpt_flame_opts *o);

/* Writes a self-contained SVG flame graph of type t. -1 on out-of-memory
 * or write error. */
int mpt_flame_write(FILE *out, const mpt_profile *p, size_t t, const mpt_flame_opts *o);

#endif
