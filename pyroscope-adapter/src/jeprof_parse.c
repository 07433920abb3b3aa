/* SPDX-License-Identifier: MIT */
/* jemalloc heap_v2 dump parser. The format (jemalloc 5.x prof_data.c):
 *
 *   heap_v2/<period>
 *     t*: <objs>: <bytes> [<accum objs>: <accum bytes>]
 *     t<thread>: <objs>: <bytes> [<a>: <b>]  [thread name]
 *   @ 0x<pc> 0x<pc> ...
 *     t*: <objs>: <bytes> [<a>: <b>]
 *     t<thread>: ...
 *   (blank)
 *   MAPPED_LIBRARIES:
 *   <copy of /proc/self/maps>
 *
 * Every line is checked; any deviation is an error with its line number.
 */
#define _GNU_SOURCE
#include "jeprof_parse.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const char *p, *end;
} cursor;

static bool eat(cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool dec(cursor *c, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        c->p++;
    }
    *out = v;
    return c->p > s;
}

static bool hex(cursor *c, uint64_t *out)
{
    if (!eat(c, "0x"))
        return false;
    uint64_t v = 0;
    const char *s = c->p;
    while (c->p < c->end) {
        char ch = *c->p;
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            break;
        if (c->p - s >= 16)
            return false;
        v = (v << 4) | d;
        c->p++;
    }
    *out = v;
    return c->p > s;
}

/* "<objs>: <bytes> [<a>: <b>]" */
static bool counts(cursor *c, uint64_t v[4])
{
    return dec(c, &v[0]) && eat(c, ": ") && dec(c, &v[1]) && eat(c, " [") && dec(c, &v[2]) &&
           eat(c, ": ") && dec(c, &v[3]) && eat(c, "]");
}

typedef struct vec {
    void *data;
    size_t len, cap, elem;
} vec;

static void *vec_push(vec *v)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        if (cap > SIZE_MAX / v->elem)
            return NULL;
        void *d = realloc(v->data, cap * v->elem);
        if (!d)
            return NULL;
        v->data = d;
        v->cap = cap;
    }
    return (char *)v->data + v->elem * v->len++;
}

static int fail(mp_jeprof_dump *out, vec *st, vec *fr, char *err, size_t errlen, size_t line,
                const char *why)
{
    free(st->data);
    free(fr->data);
    memset(out, 0, sizeof *out);
    if (err && errlen)
        snprintf(err, errlen, "heap dump line %zu: %s", line, why);
    return -1;
}

int mp_jeprof_parse(const char *buf, size_t len, mp_jeprof_dump *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    vec st = {.elem = sizeof(mp_jeprof_stack)}, fr = {.elem = sizeof(uint64_t)};
    const char *p = buf, *end = buf + len;
    size_t lineno = 0;
    enum { HEADER, TOTAL, BODY, NEED_TOTAL } state = HEADER;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        cursor c = {p, nl ? nl : end};
        p = nl ? nl + 1 : end;
        lineno++;
        if (state == HEADER) {
            if (!eat(&c, "heap_v2/") || !dec(&c, &out->period) || c.p != c.end || out->period == 0)
                return fail(out, &st, &fr, err, errlen, lineno, "expected 'heap_v2/<period>'");
            state = TOTAL;
            continue;
        }
        if (c.p == c.end)
            continue;
        if (eat(&c, "MAPPED_LIBRARIES:"))
            break;
        if (eat(&c, "@")) {
            if (state == NEED_TOTAL || state == TOTAL)
                return fail(out, &st, &fr, err, errlen, lineno,
                            state == TOTAL ? "backtrace before the totals line"
                                           : "backtrace without a 't*:' line");
            mp_jeprof_stack *s = vec_push(&st);
            if (!s)
                return fail(out, &st, &fr, err, errlen, lineno, "out of memory");
            memset(s, 0, sizeof *s);
            s->frame_off = fr.len;
            while (eat(&c, " ")) {
                uint64_t pc;
                if (!hex(&c, &pc))
                    return fail(out, &st, &fr, err, errlen, lineno, "bad frame address");
                if (s->depth >= MP_JEPROF_MAX_DEPTH)
                    return fail(out, &st, &fr, err, errlen, lineno, "backtrace too deep");
                uint64_t *f = vec_push(&fr);
                if (!f)
                    return fail(out, &st, &fr, err, errlen, lineno, "out of memory");
                *f = pc;
                s->depth++;
            }
            if (c.p != c.end)
                return fail(out, &st, &fr, err, errlen, lineno, "junk after backtrace");
            state = NEED_TOTAL;
            continue;
        }
        if (eat(&c, "  t*: ")) {
            uint64_t v[4];
            if (!counts(&c, v) || c.p != c.end)
                return fail(out, &st, &fr, err, errlen, lineno, "bad 't*:' counts");
            if (state == TOTAL) {
                out->total_objs = v[0];
                out->total_bytes = v[1];
                out->total_accum_objs = v[2];
                out->total_accum_bytes = v[3];
                state = BODY;
            } else if (state == NEED_TOTAL) {
                mp_jeprof_stack *s = (mp_jeprof_stack *)st.data + (st.len - 1);
                s->objs = v[0];
                s->bytes = v[1];
                s->accum_objs = v[2];
                s->accum_bytes = v[3];
                state = BODY;
            } else {
                return fail(out, &st, &fr, err, errlen, lineno, "second 't*:' line for a stack");
            }
            continue;
        }
        if (eat(&c, "  t")) {
            uint64_t tid, v[4];
            if (state == NEED_TOTAL || state == TOTAL)
                return fail(out, &st, &fr, err, errlen, lineno, "thread line before 't*:'");
            if (!dec(&c, &tid) || !eat(&c, ": ") || !counts(&c, v))
                return fail(out, &st, &fr, err, errlen, lineno, "bad thread counts");
            continue; /* per-thread split; optional thread name follows */
        }
        return fail(out, &st, &fr, err, errlen, lineno, "unrecognised line");
    }
    if (state == HEADER || state == TOTAL)
        return fail(out, &st, &fr, err, errlen, lineno, "truncated dump (no totals line)");
    if (state == NEED_TOTAL)
        return fail(out, &st, &fr, err, errlen, lineno,
                    "truncated dump (backtrace without counts)");
    out->stacks = st.data;
    out->nstacks = st.len;
    out->frames = fr.data;
    out->nframes = fr.len;
    return 0;
}

void mp_jeprof_dump_free(mp_jeprof_dump *d)
{
    free(d->stacks);
    free(d->frames);
    memset(d, 0, sizeof *d);
}

void mp_jeprof_unbias(uint64_t objs, uint64_t bytes, uint64_t period, double *u_objs,
                      double *u_bytes)
{
    if (objs == 0 || bytes == 0 || period == 0) {
        *u_objs = *u_bytes = 0;
        return;
    }
    double ratio = (double)bytes / (double)objs;
    double denom = -expm1(-ratio / (double)period);
    double scale = denom > 0 ? 1.0 / denom : 1.0;
    *u_objs = (double)objs * scale;
    *u_bytes = (double)bytes * scale;
}
