/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command and its preload runtime: parsing sizes
 * and durations given on the command line or in MIMPROF_* variables, and
 * formatting values in human units. No allocation; safe to call from the
 * preload's constructor. */
#ifndef MIMPROF_TOOL_UNITS_H
#define MIMPROF_TOOL_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "4096", "512k", "512K", "512KiB", "1m", "2g" (binary multiples; an
 * optional trailing "b"/"B"/"iB"). False on junk, overflow or an empty
 * string. */
bool mpt_parse_size(const char *s, uint64_t *out);

/* A memory threshold: a size as mpt_parse_size (> 0; *pct = 0), or a
 * whole percentage "1%".."100%" (*bytes = 0). False otherwise. */
bool mpt_parse_threshold(const char *s, uint64_t *bytes, unsigned *pct);

/* "0", "10s", "500ms", "2m", "1h", "1.5s"; a bare number means seconds.
 * Result in milliseconds. False on junk, negatives or overflow. */
bool mpt_parse_duration_ms(const char *s, uint64_t *out);

/* Formats `v` measured in `unit` (a pprof unit string: "bytes",
 * "nanoseconds", "microseconds", "milliseconds", "seconds", "count", ...)
 * into `buf`: "1.50MiB", "12.30ms", "1234". Always NUL-terminates. */
void mpt_format_value(char *buf, size_t n, double v, const char *unit);

#endif
