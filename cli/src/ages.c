/* SPDX-License-Identifier: MIT */
/* Ages of in-use memory in a profile (ages.h). mimprof labels each in-use
 * sample with the lower bound of its age bucket, so a filter at a bucket
 * bound is exact and one between bounds is exact to the bound below it;
 * a producer that labels exact ages gets exact filters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ages.h"
#include "units.h"

static const struct {
    const char *name;
    int64_t ns;
} TIME_UNITS[] = {
    {"ns", 1},
    {"nanosecond", 1},
    {"us", 1000},
    {"microsecond", 1000},
    {"ms", 1000000},
    {"millisecond", 1000000},
    {"s", 1000000000},
    {"sec", 1000000000},
    {"second", 1000000000},
    {"m", 60000000000},
    {"min", 60000000000},
    {"minute", 60000000000},
    {"h", 3600000000000},
    {"hour", 3600000000000},
    {"d", 86400000000000},
    {"day", 86400000000000},
};

int64_t mpt_time_label_ns(int64_t num, const char *unit)
{
    if (unit == NULL || num < 0)
        return -1;
    size_t len = strlen(unit);
    for (size_t i = 0; i < sizeof TIME_UNITS / sizeof TIME_UNITS[0]; i++) {
        size_t k = strlen(TIME_UNITS[i].name);
        /* "seconds" as well as "second"; "s" and "ms" stay themselves. */
        if (strncmp(unit, TIME_UNITS[i].name, k) == 0 &&
            (len == k || (len == k + 1 && unit[k] == 's' && k >= 3))) {
            int64_t r;
            return __builtin_mul_overflow(num, TIME_UNITS[i].ns, &r) ? -1 : r;
        }
    }
    return -1;
}

bool mpt_age_passes(const mpt_limits *lim, int64_t age_ns)
{
    if (lim->older_than_ns < 0 && lim->younger_than_ns < 0)
        return true;
    if (age_ns < 0)
        return false;
    if (lim->older_than_ns >= 0 && age_ns < lim->older_than_ns)
        return false;
    return lim->younger_than_ns < 0 || age_ns < lim->younger_than_ns;
}

bool mpt_parse_age(const char *s, int64_t *out_ns)
{
    uint64_t ms;
    if (!mpt_parse_duration_ms(s, &ms) || ms > (uint64_t)INT64_MAX / 1000000)
        return false;
    *out_ns = (int64_t)ms * 1000000;
    return true;
}

typedef struct aged {
    int64_t age, v;
} aged;

static int by_age(const void *a, const void *b)
{
    const aged *x = a, *y = b;
    return x->age < y->age ? -1 : x->age > y->age;
}

int mpt_func_median_age(const mpt_profile *p, size_t t, int64_t **out)
{
    int64_t *med = malloc((p->nnames + 1) * sizeof *med);
    /* Per function, its (age, value) pairs: counted, then filled. */
    size_t *off = calloc(p->nnames + 2, sizeof *off);
    size_t *next = malloc((p->nnames + 1) * sizeof *next);   /* where its next pair goes */
    uint32_t *last = malloc((p->nnames + 1) * sizeof *last); /* last sample counted + 1 */
    aged *pairs = NULL;
    int rc = -1;
    if (med == NULL || off == NULL || next == NULL || last == NULL || p->nsamples >= UINT32_MAX)
        goto out;
    memset(last, 0, (p->nnames + 1) * sizeof *last);
    for (size_t s = 0; s < p->nsamples; s++)
        for (size_t f = p->stack_off[s]; f < p->stack_off[s + 1]; f++)
            if (last[p->frames[f]] != s + 1) { /* once per sample under recursion */
                last[p->frames[f]] = (uint32_t)(s + 1);
                off[p->frames[f] + 1]++;
            }
    for (size_t i = 0; i < p->nnames; i++)
        off[i + 1] += off[i];
    pairs = malloc((off[p->nnames] + 1) * sizeof *pairs);
    if (pairs == NULL)
        goto out;
    memset(last, 0, (p->nnames + 1) * sizeof *last);
    memcpy(next, off, (p->nnames + 1) * sizeof *next);
    for (size_t s = 0; s < p->nsamples; s++)
        for (size_t f = p->stack_off[s]; f < p->stack_off[s + 1]; f++) {
            uint32_t fn = p->frames[f];
            if (last[fn] == s + 1)
                continue;
            last[fn] = (uint32_t)(s + 1);
            pairs[next[fn]++] = (aged){p->age_ns[s], p->values[s * p->ntypes + t]};
        }
    for (size_t i = 0; i < p->nnames; i++) {
        aged *v = pairs + off[i];
        size_t n = off[i + 1] - off[i];
        qsort(v, n, sizeof *v, by_age);
        int64_t total = 0, half = 0;
        for (size_t k = 0; k < n; k++)
            if (v[k].age >= 0 && v[k].v > 0)
                total = mpt_sat_add(total, v[k].v);
        med[i] = -1;
        for (size_t k = 0; k < n && total > 0; k++) {
            if (v[k].age < 0 || v[k].v <= 0)
                continue;
            half = mpt_sat_add(half, v[k].v);
            if (half >= total - half) {
                med[i] = v[k].age;
                break;
            }
        }
    }
    *out = med;
    med = NULL;
    rc = 0;
out:
    free(med);
    free(off);
    free(next);
    free(last);
    free(pairs);
    return rc;
}

void mpt_format_age(char *buf, size_t n, int64_t ns)
{
    if (ns < 0) {
        snprintf(buf, n, "-");
        return;
    }
    int64_t s = ns / 1000000000;
    if (s < 60)
        snprintf(buf, n, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, n, s % 60 ? "%lldm%llds" : "%lldm", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400)
        snprintf(buf, n, s % 3600 / 60 ? "%lldh%lldm" : "%lldh", (long long)(s / 3600),
                 (long long)(s % 3600 / 60));
    else
        snprintf(buf, n, s % 86400 / 3600 ? "%lldd%lldh" : "%lldd", (long long)(s / 86400),
                 (long long)(s % 86400 / 3600));
}
