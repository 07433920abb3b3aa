/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command: the ages of in-use memory, as mimprof's
 * reports label them (the numeric label `age`, profiling/src/age.c), for
 * the --older-than / --younger-than filters of top, flame and diff and
 * for top's age column. */
#ifndef MIMPROF_TOOL_AGES_H
#define MIMPROF_TOOL_AGES_H

#include <stdbool.h>
#include <stdint.h>

#include "pprof_reader.h"

/* The value `num` of a numeric label of unit `unit` in nanoseconds, or -1
 * when the unit is not a time unit this reader knows ("seconds", "s",
 * "ms", "milliseconds", "us", "ns", "minutes", "hours", "days" and their
 * singular forms, as go tool pprof accepts them) or the value is negative
 * or too large. */
int64_t mpt_time_label_ns(int64_t num, const char *unit);

/* Whether a sample of age `age_ns` (-1: no age) passes the filters of
 * `lim`: age >= older_than_ns and age < younger_than_ns, for those set
 * (>= 0). With a filter set, a sample without an age never passes. */
bool mpt_age_passes(const mpt_limits *lim, int64_t age_ns);

/* Parses a --older-than / --younger-than value ("10m", "90s", "1h") into
 * nanoseconds. False on junk. */
bool mpt_parse_age(const char *s, int64_t *out_ns);

/* The age column of `top`: per function (p->nnames entries, malloc()ed into
 * *out), the median age of the memory of type t its stacks hold (its cum
 * value, weighted by value), -1 where none of it carries an age. -1 on
 * out-of-memory. */
int mpt_func_median_age(const mpt_profile *p, size_t t, int64_t **out);

/* Formats an age in nanoseconds as "0s", "3s", "10m", "1h30m", "2d" into
 * buf; "-" for -1. */
void mpt_format_age(char *buf, size_t n, int64_t ns);

#endif
