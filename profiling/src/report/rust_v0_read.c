/* SPDX-License-Identifier: MIT */
/* The lexical pieces of Rust v0 names (rust_v0_parse.h): base62 numbers,
 * identifiers (Punycode decoded), lifetimes, and the bounded output. */
#include <string.h>

#include "demangle.h"
#include "rust_v0_parse.h"

int v0_base62_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'z')
        return 10 + c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 36 + c - 'A';
    return -1;
}

/* base62 = "_" (0) | digits "_" (value + 1) */
bool v0_integer_62(v0 *v, uint64_t *out)
{
    if (eat(v, '_')) {
        *out = 0;
        return true;
    }
    uint64_t x = 0;
    int c;
    for (;;) {
        if (!take(v, &c))
            return false;
        if (c == '_')
            break;
        int d = v0_base62_digit(c);
        if (d < 0 || x > (UINT64_MAX - (uint64_t)d) / 62)
            return false;
        x = x * 62 + (uint64_t)d;
    }
    if (x == UINT64_MAX)
        return false;
    *out = x + 1;
    return true;
}

/* [tag base62]: 0 when absent, else the number + 1. */
bool v0_opt_integer_62(v0 *v, int tag, uint64_t *out)
{
    *out = 0;
    if (!eat(v, tag))
        return true;
    if (!v0_integer_62(v, out) || *out == UINT64_MAX)
        return false;
    *out += 1;
    return true;
}

/* ident = ["u"] decimal ["_"] bytes; with "u", the bytes are Punycode:
 * the ASCII part, "_", the deltas (the last "_" separates them). */
bool v0_read_ident(v0 *v, ident *id)
{
    bool puny = eat(v, 'u');
    int c = peek(v);
    if (c < '0' || c > '9' || !spend(v, 1))
        return false;
    v->next++;
    size_t n = (size_t)(c - '0');
    if (n != 0)
        while ((c = peek(v)) >= '0' && c <= '9') {
            if (!spend(v, 1) || n > v->len)
                return false;
            v->next++;
            n = n * 10 + (size_t)(c - '0');
        }
    (void)eat(v, '_');
    if (n > v->len - v->next || !spend(v, n))
        return false;
    const char *s = v->sym + v->next;
    v->next += n;
    *id = (ident){.ascii = s, .alen = n};
    if (!puny)
        return true;
    size_t sep = n;
    while (sep > 0 && s[sep - 1] != '_')
        sep--;
    /* sep: one past the last '_', 0 when there is none */
    id->alen = sep > 0 ? sep - 1 : 0;
    id->puny = s + sep;
    id->plen = n - sep;
    return id->plen > 0;
}

/* --- printing ----------------------------------------------------------- */

bool v0_emit(v0 *v, const char *s, size_t n)
{
    if (v->skip)
        return true;
    if (n > MP_DEMANGLE_MAX_OUTPUT - v->olen)
        return false;
    if (v->olen < v->cap) {
        size_t room = v->cap - v->olen;
        memcpy(v->out + v->olen, s, n < room ? n : room);
    }
    v->olen += n;
    return true;
}

bool v0_print(v0 *v, const char *s) { return v0_emit(v, s, strlen(s)); }

bool v0_print_u64(v0 *v, uint64_t x)
{
    char buf[24];
    size_t i = sizeof buf;
    do {
        buf[--i] = (char)('0' + x % 10);
        x /= 10;
    } while (x != 0);
    return v0_emit(v, buf + i, sizeof buf - i);
}

bool v0_print_utf8(v0 *v, uint32_t c)
{
    char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xc0 | c >> 6);
        b[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xe0 | c >> 12);
        b[1] = (char)(0x80 | (c >> 6 & 0x3f));
        b[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | c >> 18);
        b[1] = (char)(0x80 | (c >> 12 & 0x3f));
        b[2] = (char)(0x80 | (c >> 6 & 0x3f));
        b[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    return v0_emit(v, b, n);
}

bool v0_valid_char(uint64_t c) { return c <= 0x10ffff && (c < 0xd800 || c > 0xdfff); }

/* Longest decoded identifier; a longer one prints as `punycode{...}`, as
 * rustc-demangle does. Keeps the decoder's array small and its
 * insertions (O(n) each) cheap. */
#define V0_PUNY_MAX 128

/* RFC 3492 decoding of an identifier's Punycode part into cps[]; false
 * when it is malformed or decodes to more than V0_PUNY_MAX characters. */
static bool puny_decode(const ident *id, uint32_t *cps, size_t *ncps)
{
    enum { BASE = 36, TMIN = 1, TMAX = 26, SKEW = 38, DAMP = 700 };
    size_t n = 0;
    if (id->alen > V0_PUNY_MAX)
        return false;
    for (size_t k = 0; k < id->alen; k++)
        cps[n++] = (unsigned char)id->ascii[k];
    uint64_t code = 0x80, i = 0, bias = 72, damp = DAMP;
    size_t at = 0;
    while (at < id->plen) {
        uint64_t delta = 0, w = 1;
        for (uint64_t k = BASE;; k += BASE) {
            if (at >= id->plen)
                return false;
            int c = (unsigned char)id->puny[at++];
            uint64_t d;
            if (c >= 'a' && c <= 'z')
                d = (uint64_t)(c - 'a');
            else if (c >= '0' && c <= '9')
                d = (uint64_t)(26 + c - '0');
            else
                return false;
            uint64_t t = k <= bias ? TMIN : k - bias >= TMAX ? TMAX : k - bias;
            if (d > (UINT32_MAX - delta) / w)
                return false;
            delta += d * w;
            if (d < t)
                break;
            w *= BASE - t;
            if (w > UINT32_MAX)
                return false;
        }
        if (n >= V0_PUNY_MAX)
            return false;
        n++;
        i += delta;
        code += i / n;
        i %= n;
        if (!v0_valid_char(code))
            return false;
        memmove(cps + i + 1, cps + i, (n - 1 - i) * sizeof *cps);
        cps[i++] = (uint32_t)code;
        /* bias adaptation */
        delta /= damp;
        damp = 2;
        delta += delta / n;
        uint64_t k = 0;
        while (delta > ((BASE - TMIN) * TMAX) / 2) {
            delta /= BASE - TMIN;
            k += BASE;
        }
        bias = k + ((BASE - TMIN + 1) * delta) / (delta + SKEW);
    }
    *ncps = n;
    return true;
}

bool v0_print_ident(v0 *v, const ident *id)
{
    if (v->skip)
        return true;
    if (id->plen == 0)
        return v0_emit(v, id->ascii, id->alen);
    uint32_t cps[V0_PUNY_MAX];
    size_t n;
    if (puny_decode(id, cps, &n)) {
        for (size_t k = 0; k < n; k++)
            if (!v0_print_utf8(v, cps[k]))
                return false;
        return true;
    }
    if (!v0_print(v, "punycode{"))
        return false;
    if (id->alen > 0 && (!v0_emit(v, id->ascii, id->alen) || !v0_print(v, "-")))
        return false;
    return v0_emit(v, id->puny, id->plen) && v0_print(v, "}");
}

/* '_ for 0, else the binder's name: 'a.. 'z, then '_26 on. */
bool v0_print_lifetime(v0 *v, uint64_t lt)
{
    if (!v0_print(v, "'"))
        return false;
    if (lt == 0)
        return v0_print(v, "_");
    if (v->skip)
        return true;
    if (lt > v->bound_lifetimes)
        return false;
    uint64_t d = v->bound_lifetimes - lt;
    if (d < 26) {
        char c = (char)('a' + d);
        return v0_emit(v, &c, 1);
    }
    return v0_print(v, "_") && v0_print_u64(v, d);
}
