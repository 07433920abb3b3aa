/* SPDX-License-Identifier: MIT */
/* Queries of a decoded profile (pprof_reader.h): sample types, totals,
 * per-function totals, display names. */
#define _GNU_SOURCE
#include "pprof_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "pprof_bound.h"

void mpt_profile_free(mpt_profile *p)
{
    if (p == NULL)
        return;
    for (size_t t = 0; t < p->ntypes; t++) {
        if (p->type_name != NULL)
            free(p->type_name[t]);
        if (p->type_unit != NULL)
            free(p->type_unit[t]);
    }
    free(p->type_name);
    free(p->type_unit);
    for (size_t i = 0; i < p->nnames; i++)
        free(p->names[i]);
    free(p->names);
    free(p->stack_off);
    free(p->frames);
    free(p->values);
    free(p->age_ns);
    for (size_t i = 0; i < p->ncomments; i++)
        free(p->comments[i]);
    free(p->comments);
    free(p->program);
    free(p->period_type);
    free(p->period_unit);
    free(p);
}

int mpt_profile_find_type(const mpt_profile *p, const char *name)
{
    for (size_t t = 0; t < p->ntypes; t++)
        if (strcmp(p->type_name[t], name) == 0)
            return (int)t;
    return -1;
}

int mpt_profile_pick_type(const mpt_profile *p, const char *name, char *err, size_t errlen)
{
    if (p->ntypes == 0)
        return mpt_fail(err, errlen, "the profile has no sample types");
    if (name == NULL)
        return (int)p->default_type;
    int t = mpt_profile_find_type(p, name);
    if (t >= 0)
        return t;
    char have[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < p->ntypes && off + 1 < sizeof have; i++) {
        char nm[64];
        int w = snprintf(have + off, sizeof have - off, "%s%s", i ? ", " : "",
                         mpt_display_name(p->type_name[i], nm, sizeof nm, 40));
        if (w < 0)
            break;
        off += (size_t)w;
    }
    char want[64];
    return mpt_fail(err, errlen, "no sample type '%s' in this profile (have: %s)",
                    mpt_display_name(name, want, sizeof want, 40), have);
}

int64_t mpt_profile_total(const mpt_profile *p, size_t t)
{
    int64_t sum = 0;
    for (size_t s = 0; s < p->nsamples; s++)
        sum = mpt_sat_add(sum, p->values[s * p->ntypes + t]);
    return sum;
}

int mpt_func_totals_compute(const mpt_profile *p, size_t t, mpt_func_totals *out)
{
    out->flat = calloc(p->nnames + 1, sizeof *out->flat);
    out->cum = calloc(p->nnames + 1, sizeof *out->cum);
    /* last[f] = 1 + the sample that last added to cum[f]: counts a
     * function once per sample under recursion. */
    size_t *last = calloc(p->nnames + 1, sizeof *last);
    if (out->flat == NULL || out->cum == NULL || last == NULL) {
        free(last);
        mpt_func_totals_free(out);
        return -1;
    }
    for (size_t s = 0; s < p->nsamples; s++) {
        int64_t v = p->values[s * p->ntypes + t];
        size_t a = p->stack_off[s], b = p->stack_off[s + 1];
        if (a == b || v == 0)
            continue;
        out->flat[p->frames[a]] = mpt_sat_add(out->flat[p->frames[a]], v);
        for (size_t i = a; i < b; i++) {
            uint32_t f = p->frames[i];
            if (last[f] != s + 1) {
                last[f] = s + 1;
                out->cum[f] = mpt_sat_add(out->cum[f], v);
            }
        }
    }
    free(last);
    return 0;
}

void mpt_func_totals_free(mpt_func_totals *ft)
{
    free(ft->flat);
    free(ft->cum);
    ft->flat = ft->cum = NULL;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        min = 0x80;
        c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        min = 0x800;
        c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

char *mpt_display_name(const char *s, char *buf, size_t n, size_t max_chars)
{
    if (n < 8) {
        if (n > 0)
            buf[0] = '\0';
        return buf;
    }
    /* Characters that fit: at most max_chars, and 4 bytes each at most
     * plus ".." and the NUL in n. */
    size_t total = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u != 0; total++) {
        size_t l = utf8_len(u);
        u += l ? l : 1;
    }
    size_t room = (n - 3) / 4;
    bool cut = total > max_chars || total > room;
    size_t keep = cut ? (max_chars < room ? max_chars : room) : total;
    if (cut)
        keep = keep >= 2 ? keep - 2 : 0;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t c = 0; c < keep; c++) {
        size_t l = utf8_len(u);
        if (l == 0 || (l == 1 && (*u < 0x20 || *u == 0x7f))) {
            buf[o++] = '?';
            u++;
        } else {
            memcpy(buf + o, u, l);
            o += l;
            u += l;
        }
    }
    if (cut && o + 3 <= n) {
        buf[o++] = '.';
        buf[o++] = '.';
    }
    buf[o] = '\0';
    return buf;
}
