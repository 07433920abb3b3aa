/* SPDX-License-Identifier: MIT */
/* The reader: s-expression text to heap objects.
 *
 *   form    := list | vector | closure | string | integer | symbol
 *   list    := '(' form* ['.' form] ')'
 *   vector  := '#(' form* ')'
 *   closure := '#<' builtin-name form '>'   (the '>' after a blank)
 *   string  := '"' (char | '\' ( '"' | '\' | 'n' | 't' | '0' | 'x' hex hex))* '"'
 *   integer := ['-'] digit+          (fits in a machine word)
 *   symbol  := any other run of non-blank, non-delimiter characters
 *   ';' starts a comment to the end of the line. */
#include "sexp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 10000

struct reader {
    struct sexp *sx;
    const char *p, *end, *text;
    int depth;
    void **stack; /* vector elements being read */
    size_t n, cap;
    char *buf; /* unescaped string bytes */
    size_t buf_cap;
    mp_img_error *err;
};

static int fail(struct reader *r, const char *what)
{
    if (r->err) {
        r->err->status = MP_IMG_E_ARGUMENT;
        snprintf(r->err->detail, sizeof r->err->detail, "offset %zu: %s", (size_t)(r->p - r->text),
                 what);
    }
    return -1;
}

static int is_delim(char c)
{
    return c == '(' || c == ')' || c == '"' || c == ';' || c == ' ' || c == '\t' || c == '\n' ||
           c == '\r';
}

static void skip_blank(struct reader *r)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == ';') {
            while (r->p < r->end && *r->p != '\n')
                r->p++;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            r->p++;
        } else {
            return;
        }
    }
}

static int read_form(struct reader *r, void **out);

static int read_list(struct reader *r, void **out)
{
    void *head = NULL;
    mp_img_word *tail = NULL;
    for (;;) {
        skip_blank(r);
        if (r->p >= r->end)
            return fail(r, "unterminated list");
        if (*r->p == ')') {
            r->p++;
            *out = head;
            return 0;
        }
        if (*r->p == '.' && r->p + 1 < r->end && is_delim(r->p[1]) && tail) {
            r->p++;
            void *rest;
            if (read_form(r, &rest))
                return -1;
            tail[1] = (mp_img_word)rest;
            skip_blank(r);
            if (r->p >= r->end || *r->p != ')')
                return fail(r, "expected ')' after a dotted tail");
            r->p++;
            *out = head;
            return 0;
        }
        void *item;
        if (read_form(r, &item))
            return -1;
        mp_img_word *cell = sexp_cons(r->sx, item, NULL);
        if (!cell)
            return fail(r, "out of memory");
        if (tail)
            tail[1] = (mp_img_word)cell;
        else
            head = cell;
        tail = cell;
    }
}

static int read_vector(struct reader *r, void **out)
{
    size_t base = r->n;
    for (;;) {
        skip_blank(r);
        if (r->p >= r->end)
            return fail(r, "unterminated vector");
        if (*r->p == ')')
            break;
        void *item;
        if (read_form(r, &item))
            return -1;
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 64;
            void **s = realloc(r->stack, cap * sizeof *s);
            if (!s)
                return fail(r, "out of memory");
            r->stack = s;
            r->cap = cap;
        }
        r->stack[r->n++] = item;
    }
    r->p++;
    mp_img_word *vec = sexp_vector(r->sx, r->n - base);
    if (!vec)
        return fail(r, "out of memory");
    for (size_t i = base; i < r->n; i++)
        vec[1 + i - base] = (mp_img_word)r->stack[i];
    r->n = base;
    *out = vec;
    return 0;
}

static int read_closure(struct reader *r, void **out)
{
    const char *name = r->p;
    while (r->p < r->end && !is_delim(*r->p))
        r->p++;
    sexp_builtin_fn fn = sexp_builtin(name, (size_t)(r->p - name));
    if (!fn)
        return fail(r, "unknown builtin in #<...>");
    void *captured;
    if (read_form(r, &captured))
        return -1;
    skip_blank(r);
    if (r->p >= r->end || *r->p != '>')
        return fail(r, "expected '>' to close a closure");
    r->p++;
    *out = sexp_closure(r->sx, fn, captured);
    return *out ? 0 : fail(r, "out of memory");
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static int read_string(struct reader *r, void **out)
{
    size_t n = 0;
    for (;;) {
        if (r->p >= r->end)
            return fail(r, "unterminated string");
        char c = *r->p++;
        if (c == '"')
            break;
        if (c == '\\') {
            if (r->p >= r->end)
                return fail(r, "unterminated string");
            char e = *r->p++;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == '0')
                c = '\0';
            else if (e == '"' || e == '\\')
                c = e;
            else if (e == 'x' && r->end - r->p >= 2 && hex(r->p[0]) >= 0 && hex(r->p[1]) >= 0) {
                c = (char)(hex(r->p[0]) * 16 + hex(r->p[1]));
                r->p += 2;
            } else
                return fail(r, "bad escape in string");
        }
        if (n == r->buf_cap) {
            size_t cap = r->buf_cap ? r->buf_cap * 2 : 256;
            char *b = realloc(r->buf, cap);
            if (!b)
                return fail(r, "out of memory");
            r->buf = b;
            r->buf_cap = cap;
        }
        r->buf[n++] = c;
    }
    *out = sexp_string(r->sx, r->buf ? r->buf : "", n);
    return *out ? 0 : fail(r, "out of memory");
}

/* An integer if the whole token is one and fits, else a symbol. */
static int read_atom(struct reader *r, void **out)
{
    const char *tok = r->p;
    while (r->p < r->end && !is_delim(*r->p))
        r->p++;
    size_t len = (size_t)(r->p - tok);
    size_t i = (len > 1 && tok[0] == '-') ? 1 : 0;
    int numeric = i < len;
    for (size_t k = i; k < len && numeric; k++)
        numeric = tok[k] >= '0' && tok[k] <= '9';
    if (numeric && len < 20) {
        char tmp[24];
        memcpy(tmp, tok, len);
        tmp[len] = '\0';
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (!errno && v >= INTPTR_MIN && v <= INTPTR_MAX) {
            *out = sexp_integer(r->sx, (intptr_t)v);
            return *out ? 0 : fail(r, "out of memory");
        }
    }
    *out = sexp_intern(r->sx, tok, len);
    return *out ? 0 : fail(r, "out of memory");
}

static int read_form(struct reader *r, void **out)
{
    skip_blank(r);
    if (r->p >= r->end)
        return fail(r, "expected a form");
    if (++r->depth > MAX_DEPTH)
        return fail(r, "nested too deeply");
    int rc;
    char c = *r->p;
    if (c == '(') {
        r->p++;
        rc = read_list(r, out);
    } else if (c == '#' && r->p + 1 < r->end && r->p[1] == '(') {
        r->p += 2;
        rc = read_vector(r, out);
    } else if (c == '#' && r->p + 1 < r->end && r->p[1] == '<') {
        r->p += 2;
        rc = read_closure(r, out);
    } else if (c == '"') {
        r->p++;
        rc = read_string(r, out);
    } else if (c == ')') {
        rc = fail(r, "unexpected closing delimiter");
    } else {
        rc = read_atom(r, out);
    }
    r->depth--;
    return rc;
}

int sexp_parse(struct sexp *sx, const char *text, size_t len, mp_img_error *err)
{
    struct reader r = {.sx = sx, .p = text, .end = text + len, .text = text, .err = err};
    void *head = NULL;
    mp_img_word *tail = NULL;
    int rc = 0;
    for (;;) {
        skip_blank(&r);
        if (r.p >= r.end)
            break;
        void *form;
        if ((rc = read_form(&r, &form)))
            break;
        mp_img_word *cell = sexp_cons(sx, form, NULL);
        if (!cell) {
            rc = fail(&r, "out of memory");
            break;
        }
        if (tail)
            tail[1] = (mp_img_word)cell;
        else
            head = cell;
        tail = cell;
    }
    free(r.stack);
    free(r.buf);
    if (rc)
        return rc;
    return mp_img_root_set(sx->heap, "forms", head, err) == MP_IMG_OK ? 0 : -1;
}
