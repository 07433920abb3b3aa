/* SPDX-License-Identifier: MIT */
/* The printer: heap objects back to canonical s-expression text, the
 * reader's grammar with one spelling per value (so parse . print is the
 * identity on canonical text). */
#include "sexp.h"

#include <string.h>

static void print_bytes(const mp_img_word *obj, FILE *out)
{
    const unsigned char *s = (const unsigned char *)obj[1];
    fputc('"', out);
    for (size_t i = 0; i < obj[0]; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static int print_form(const struct sexp *sx, const mp_img_word *obj, FILE *out, int depth)
{
    if (depth > 10000)
        return -1;
    if (!obj) {
        fputs("()", out);
        return 0;
    }
    const struct sexp_types *ty = sx->ty;
    const mp_img_type *t = mp_img_type_of(sx->heap, obj);
    if (t == ty->symbol) {
        fwrite((const char *)obj[1], 1, obj[0], out);
    } else if (t == ty->string) {
        print_bytes(obj, out);
    } else if (t == ty->integer) {
        fprintf(out, "%lld", (long long)(intptr_t)obj[0]);
    } else if (t == ty->cons) {
        fputc('(', out);
        for (;;) {
            if (print_form(sx, (const mp_img_word *)obj[0], out, depth + 1))
                return -1;
            const mp_img_word *rest = (const mp_img_word *)obj[1];
            if (!rest)
                break;
            if (mp_img_type_of(sx->heap, rest) != ty->cons) {
                fputs(" . ", out);
                if (print_form(sx, rest, out, depth + 1))
                    return -1;
                break;
            }
            fputc(' ', out);
            obj = rest;
        }
        fputc(')', out);
    } else if (t == ty->vector) {
        fputs("#(", out);
        for (size_t i = 1; i <= obj[0]; i++) {
            if (i > 1)
                fputc(' ', out);
            if (print_form(sx, (const mp_img_word *)obj[i], out, depth + 1))
                return -1;
        }
        fputc(')', out);
    } else if (t == ty->closure) {
        const char *name = sexp_builtin_name((sexp_builtin_fn)(uintptr_t)obj[0]);
        fprintf(out, "#<%s ", name ? name : "?");
        if (print_form(sx, (const mp_img_word *)obj[1], out, depth + 1))
            return -1;
        fputs(" >", out);
    } else {
        fputs("#<unprintable>", out);
    }
    return 0;
}

int sexp_print_forms(const struct sexp *sx, FILE *out)
{
    for (const mp_img_word *c = mp_img_root_get(sx->heap, "forms"); c;
         c = (const mp_img_word *)c[1]) {
        if (print_form(sx, (const mp_img_word *)c[0], out, 0))
            return -1;
        fputc('\n', out);
    }
    return ferror(out) ? -1 : 0;
}
