/* SPDX-License-Identifier: MIT */
/* Shapes: a unit count and a 2-bit kind per unit, and their readable
 * spelling ("*: word ref", "word ref bytes", "6: word ref"). */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[4] = {"ref", "word", "bytes", "foreign"};

mp_img_kind mp_img_shape_kind(const mp_img_shape *s, size_t unit)
{
    /* A zero mask means all references, whatever `described` says. */
    if (s->mask == 0 || s->described == 0)
        return MP_IMG_REF;
    /* Units past the mask take the kind of the last unit it describes. */
    size_t i = unit < s->described ? unit : s->described - 1;
    return (mp_img_kind)((s->mask >> (2 * i)) & 3u);
}

mp_img_status img_shape_check(const mp_img_shape *s, mp_img_error *err)
{
    if (s->described > MP_IMG_MASK_UNITS)
        return img_fail(err, MP_IMG_E_ARGUMENT, "a shape describes at most %d units, not %u",
                        MP_IMG_MASK_UNITS, (unsigned)s->described);
    if (s->described < MP_IMG_MASK_UNITS && (s->mask >> (2 * s->described)) != 0)
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "shape mask has kinds past the %u units it describes",
                        (unsigned)s->described);
    /* Do not give one value two meanings: the dynamic count is a machine
     * value, so unit 0 of a dynamic shape must be a word. */
    if (s->dynamic && mp_img_shape_kind(s, 0) != MP_IMG_WORD)
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "unit 0 of a dynamic shape holds the count and must be a word");
    return MP_IMG_OK;
}

void img_shape_canon(mp_img_shape *s)
{
    if (!s->dynamic && s->described > s->count)
        s->described = s->count > 0 ? s->count : 0;
    if (s->described < MP_IMG_MASK_UNITS)
        s->mask &= ((uint64_t)1 << (2 * s->described)) - 1;
    /* Trailing kinds equal to the one before them say nothing: units past
     * the mask repeat the last kind anyway. */
    while (s->described >= 2 &&
           mp_img_shape_kind(s, s->described - 1) == mp_img_shape_kind(s, s->described - 2)) {
        s->described--;
        s->mask &= ((uint64_t)1 << (2 * s->described)) - 1;
    }
    if (s->mask == 0)
        s->described = 0;
    if (s->dynamic)
        s->count = 0;
}

int img_shape_equal(const mp_img_shape *a, const mp_img_shape *b)
{
    return a->dynamic == b->dynamic && a->count == b->count && a->described == b->described &&
           a->mask == b->mask;
}

int img_shape_has_kind(const mp_img_shape *s, size_t units, mp_img_kind kind)
{
    size_t n = units < (size_t)s->described + 1 ? units : (size_t)s->described + 1;
    for (size_t i = 0; i < n; i++)
        if (mp_img_shape_kind(s, i) == kind)
            return 1;
    return 0;
}

static int parse_kind(const char *tok, size_t len)
{
    for (int k = 0; k < 4; k++)
        if (strlen(kind_names[k]) == len && memcmp(kind_names[k], tok, len) == 0)
            return k;
    return -1;
}

mp_img_status mp_img_shape_parse(const char *spelling, mp_img_shape *out, mp_img_error *err)
{
    if (!spelling || !out)
        return img_fail(err, MP_IMG_E_ARGUMENT, "shape spelling and output must not be NULL");
    mp_img_shape s = {0};
    const char *p = spelling;
    while (isspace((unsigned char)*p))
        p++;
    int have_count = 0;
    const char *colon = strchr(p, ':');
    if (colon) {
        const char *q = p;
        if (*q == '*' && q + 1 == colon) {
            s.dynamic = true;
        } else {
            char *end;
            errno = 0;
            unsigned long n = strtoul(q, &end, 10);
            if (end == q || end != colon || errno || n > UINT32_MAX || !isdigit((unsigned char)*q))
                return img_fail(err, MP_IMG_E_ARGUMENT,
                                "shape '%s': the prefix before ':' must be a count or '*'",
                                spelling);
            s.count = (uint32_t)n;
            have_count = 1;
        }
        p = colon + 1;
    }
    size_t listed = 0;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *tok = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        int k = parse_kind(tok, (size_t)(p - tok));
        if (k < 0)
            return img_fail(err, MP_IMG_E_ARGUMENT,
                            "shape '%s': '%.*s' is not a kind (ref, word, bytes, foreign)",
                            spelling, (int)(p - tok), tok);
        if (listed == MP_IMG_MASK_UNITS)
            return img_fail(err, MP_IMG_E_ARGUMENT, "shape '%s' lists more than %d kinds", spelling,
                            MP_IMG_MASK_UNITS);
        s.mask |= (uint64_t)k << (2 * listed);
        listed++;
    }
    s.described = (uint32_t)listed;
    if (!have_count && !s.dynamic)
        s.count = (uint32_t)listed;
    if (have_count && s.count < listed)
        return img_fail(err, MP_IMG_E_ARGUMENT, "shape '%s' lists more kinds than its count",
                        spelling);
    if (s.dynamic && listed == 0)
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "shape '%s': a dynamic shape lists at least unit 0 (word)", spelling);
    mp_img_status st = img_shape_check(&s, err);
    if (st != MP_IMG_OK)
        return st;
    *out = s;
    return img_ok(err);
}

size_t mp_img_shape_format(const mp_img_shape *s, char *buf, size_t cap)
{
    char tmp[16 + MP_IMG_MASK_UNITS * 8];
    size_t n = 0;
    size_t listed = s->mask == 0 ? 0 : s->described;
    if (s->dynamic)
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "*:");
    else if (s->count != listed)
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%u:", (unsigned)s->count);
    if (s->mask == 0 && (s->dynamic || s->count > 0))
        listed = 1; /* all references */
    for (size_t i = 0; i < listed; i++)
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s%s", n ? " " : "",
                              kind_names[mp_img_shape_kind(s, i)]);
    if (cap) {
        size_t c = n < cap - 1 ? n : cap - 1;
        memcpy(buf, tmp, c);
        buf[c] = '\0';
    }
    return n;
}
