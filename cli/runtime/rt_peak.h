/* SPDX-License-Identifier: MIT */
/* The peak profile next to each report of the preload runtime: the
 * window's high-water mark (mp_profiler_report_peak) written as
 * DIR/heap.<pid>.<seq>.peak.pb.gz beside DIR/heap.<pid>.<seq>.pb.gz (the
 * directory mode of MIMPROF_OUTPUT; a file pattern gets none, so that a
 * name chosen by the user is the only file written). Not installed. */
#ifndef MIMPROF_TOOL_RT_PEAK_H
#define MIMPROF_TOOL_RT_PEAK_H

#include <stdbool.h>
#include <stddef.h>

/* The peak's name for the report `report` (…/heap.<pid>.<seq>.pb.gz ->
 * …/heap.<pid>.<seq>.peak.pb.gz). 0, or -1 (not a directory-mode name, or
 * too long). */
int mpt_peak_name(const char *report, char *dst, size_t cap);

#endif
