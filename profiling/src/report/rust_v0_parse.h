/* SPDX-License-Identifier: MIT */
/* Internal to the Rust v0 demangler (rust_v0.h): the reader's state and
 * the pieces its files share.
 *
 *   rust_v0.c        paths, types, the passes (entry)
 *   rust_v0_const.c  constants (generic arguments `K...`)
 *   rust_v0_read.c   numbers, identifiers (Punycode), lifetimes, output
 *
 * Every function returns false to refuse the whole name: nothing is
 * optional past a false (the caller unwinds and the name stays mangled).
 */
#ifndef MIMPROF_PROFILING_REPORT_RUST_V0_PARSE_H
#define MIMPROF_PROFILING_REPORT_RUST_V0_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rust_v0.h"

typedef struct v0 {
    const char *sym; /* after "_R" */
    size_t len;      /* of the mangled part, suffix excluded */
    size_t next;     /* read position in sym */
    unsigned depth;
    unsigned long work;
    uint64_t bound_lifetimes; /* lifetimes bound by the enclosing for<...> */
    bool skip;                /* reading without printing */
    char *out;
    size_t cap, olen;
} v0;

/* Every read byte is spent: the work budget (rust_v0.h). */
static inline bool spend(v0 *v, size_t n)
{
    v->work += n;
    return v->work <= MP_V0_MAX_WORK;
}

static inline int peek(const v0 *v)
{
    return v->next < v->len ? (unsigned char)v->sym[v->next] : -1;
}

static inline bool take(v0 *v, int *c)
{
    if (v->next >= v->len || !spend(v, 1))
        return false;
    *c = (unsigned char)v->sym[v->next++];
    return true;
}

static inline bool eat(v0 *v, int c)
{
    if (peek(v) != c || !spend(v, 1))
        return false;
    v->next++;
    return true;
}

static inline bool enter(v0 *v) { return ++v->depth <= MP_V0_MAX_DEPTH; }

typedef struct ident {
    const char *ascii, *puny;
    size_t alen, plen;
} ident;

/* rust_v0_read.c */
int v0_base62_digit(int c);
/* base62 = "_" (0) | digits "_" (value + 1) */
bool v0_integer_62(v0 *v, uint64_t *out);
/* [tag base62]: 0 when absent, else the number + 1 */
bool v0_opt_integer_62(v0 *v, int tag, uint64_t *out);
bool v0_read_ident(v0 *v, ident *id);
/* Output (nothing while v->skip), within MP_DEMANGLE_MAX_OUTPUT. */
bool v0_emit(v0 *v, const char *s, size_t n);
bool v0_print(v0 *v, const char *s);
bool v0_print_u64(v0 *v, uint64_t x);
bool v0_print_utf8(v0 *v, uint32_t c);
bool v0_valid_char(uint64_t c);
bool v0_print_ident(v0 *v, const ident *id);
bool v0_print_lifetime(v0 *v, uint64_t lt);

/* rust_v0.c */
bool v0_path(v0 *v, bool in_value);
enum v0_ref { REF_PATH, REF_PATH_VALUE, REF_TYPE, REF_CONST, REF_CONST_VALUE, REF_OPEN };
/* "B" base62, the tag read: re-reads the target when printing */
bool v0_backref(v0 *v, enum v0_ref kind, bool *open);
/* {item} "E", items separated by `sep`; *count (may be NULL) gets how many */
bool v0_list(v0 *v, bool (*item)(v0 *), const char *sep, size_t *count);

/* rust_v0_const.c: a constant; `in_value` false (a generic argument)
 * braces compound ones */
bool v0_konst(v0 *v, bool in_value);

#endif
