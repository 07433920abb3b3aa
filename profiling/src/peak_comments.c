/* SPDX-License-Identifier: MIT */
/* The comments of a peak profile (mp_profiler_report_peak, and the peak a
 * heap image holds): the peak's size and time, in words and numbers. */
#include <stdio.h>
#include <time.h>

#include "peak.h"

/* `ns` (CLOCK_REALTIME) as 2026-12-02T00:51:02.123Z. */
static void utc(int64_t ns, char *buf, size_t len)
{
    time_t s = (time_t)(ns / 1000000000);
    struct tm tm;
    if (ns <= 0 || gmtime_r(&s, &tm) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", day, (int)(ns / 1000000 % 1000));
}

mp_prof_status mp_peak_comments(mp_report_builder *b, const mp_prof_peak_info *pi)
{
    char at[48], from[48], until[48], line[320];
    utc(pi->time_nanos, at, sizeof at);
    utc(pi->window_start_nanos, from, sizeof from);
    utc(pi->window_end_nanos, until, sizeof until);
    snprintf(line, sizeof line, "peak: %llu bytes estimated live at %s (%.1f MiB, %llu objects)",
             (unsigned long long)pi->bytes, at, (double)pi->bytes / 1048576.0,
             (unsigned long long)pi->objects);
    mp_prof_status st = mp_report_comment(b, line);
    snprintf(line, sizeof line,
             "peak: time_nanos=%lld bytes=%llu samples=%llu window %s .. %s (the "
             "highest estimated live heap of the window, within 1/64 below it)",
             (long long)pi->time_nanos, (unsigned long long)pi->bytes,
             (unsigned long long)pi->samples, from, until);
    if (st == MP_PROF_OK)
        st = mp_report_comment(b, line);
    if (st == MP_PROF_OK && pi->incomplete)
        st = mp_report_comment(b, "peak: incomplete (memory ran out while keeping the peak "
                                  "set: some sampled blocks are missing)");
    return st;
}
