/* SPDX-License-Identifier: MIT */
/* The peak profile's file name (rt_peak.h). */
#include "rt_peak.h"

#include <stdio.h>
#include <string.h>

int mpt_peak_name(const char *report, char *dst, size_t cap)
{
    static const char suffix[] = ".pb.gz";
    size_t n = strlen(report), k = sizeof suffix - 1;
    const char *base = strrchr(report, '/');
    base = base != NULL ? base + 1 : report;
    if (n < k || strcmp(report + n - k, suffix) != 0 || strncmp(base, "heap.", 5) != 0)
        return -1;
    int w = snprintf(dst, cap, "%.*s.peak%s", (int)(n - k), report, suffix);
    return w > 0 && (size_t)w < cap ? 0 : -1;
}
