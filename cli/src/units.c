/* SPDX-License-Identifier: MIT */
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool parse_uint(const char **sp, uint64_t *out)
{
    const char *s = *sp;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *sp = s;
    *out = v;
    return true;
}

static bool lower_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char c = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        if (c != *b)
            return false;
    }
    return *a == *b;
}

bool mpt_parse_threshold(const char *s, uint64_t *bytes, unsigned *pct)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n >= 2 && n <= 4 && s[n - 1] == '%') {
        unsigned v = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                return false;
            v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v < 1 || v > 100)
            return false;
        *bytes = 0;
        *pct = v;
        return true;
    }
    uint64_t b;
    if (!mpt_parse_size(s, &b) || b == 0)
        return false;
    *bytes = b;
    *pct = 0;
    return true;
}

bool mpt_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    if (s == NULL || !parse_uint(&s, &v))
        return false;
    unsigned shift = 0;
    if (*s != '\0') {
        switch (*s) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        case 'b':
        case 'B':
            shift = 0;
            break;
        default:
            return false;
        }
        if (*s != 'b' && *s != 'B')
            s++;
        if (!(*s == '\0' || lower_eq(s, "b") || lower_eq(s, "ib")))
            return false;
    }
    if (shift != 0 && v > (UINT64_MAX >> shift))
        return false;
    *out = v << shift;
    return true;
}

bool mpt_parse_duration_ms(const char *s, uint64_t *out)
{
    uint64_t whole, frac = 0, frac_div = 1;
    if (s == NULL || !parse_uint(&s, &whole))
        return false;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (frac_div < 1000000000u) { /* keep 9 digits, ignore the rest */
                frac = frac * 10 + (uint64_t)(*s - '0');
                frac_div *= 10;
            }
        }
    }
    uint64_t ms_per;
    if (*s == '\0' || lower_eq(s, "s"))
        ms_per = 1000;
    else if (lower_eq(s, "ms"))
        ms_per = 1;
    else if (lower_eq(s, "m") || lower_eq(s, "min"))
        ms_per = 60000;
    else if (lower_eq(s, "h"))
        ms_per = 3600000;
    else
        return false;
    if (whole > UINT64_MAX / ms_per / 2)
        return false;
    *out = whole * ms_per + frac * ms_per / frac_div;
    return true;
}

void mpt_format_value(char *buf, size_t n, double v, const char *unit)
{
    if (n == 0)
        return;
    const char *u = unit != NULL ? unit : "";
    double a = fabs(v);
    if (strcmp(u, "bytes") == 0) {
        static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        size_t i = 0;
        while (a >= 1024.0 && i + 1 < sizeof names / sizeof names[0]) {
            a /= 1024.0;
            v /= 1024.0;
            i++;
        }
        if (i == 0)
            snprintf(buf, n, "%.0fB", v);
        else
            snprintf(buf, n, "%.2f%s", v, names[i]);
        return;
    }
    double ns = -1.0;
    if (strcmp(u, "nanoseconds") == 0)
        ns = 1.0;
    else if (strcmp(u, "microseconds") == 0)
        ns = 1e3;
    else if (strcmp(u, "milliseconds") == 0)
        ns = 1e6;
    else if (strcmp(u, "seconds") == 0)
        ns = 1e9;
    if (ns > 0.0) {
        double t = v * ns, at = fabs(t);
        if (at >= 1e9)
            snprintf(buf, n, "%.2fs", t / 1e9);
        else if (at >= 1e6)
            snprintf(buf, n, "%.2fms", t / 1e6);
        else if (at >= 1e3)
            snprintf(buf, n, "%.2fus", t / 1e3);
        else
            snprintf(buf, n, "%.0fns", t);
        return;
    }
    if (a >= 1e15 || (a != floor(a) && a < 1e15))
        snprintf(buf, n, "%.4g", v);
    else
        snprintf(buf, n, "%.0f", v);
}
