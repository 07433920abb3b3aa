/* SPDX-License-Identifier: MIT */
/* Constants of Rust v0 names (rust_v0_parse.h): integers, bool, char,
 * &str, references, arrays, tuples and ADTs, as rustc-demangle prints
 * them in generic arguments (`Foo<3>`, `Foo<'x'>`, `Foo<{[1, 2]}>`). */
#include <string.h>

#include "demangle.h"
#include "rust_v0_parse.h"

/* hex digits "_": nibbles at *hex, *n of them. */
static bool hex_nibbles(v0 *v, const char **hex, size_t *n)
{
    size_t start = v->next;
    int c;
    for (;;) {
        if (!take(v, &c))
            return false;
        if (c == '_')
            break;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    *hex = v->sym + start;
    *n = v->next - 1 - start;
    return true;
}

/* The value of hex nibbles when it fits 64 bits. */
static bool hex_u64(const char *hex, size_t n, uint64_t *x)
{
    while (n > 0 && *hex == '0')
        hex++, n--;
    if (n > 16)
        return false;
    *x = 0;
    for (size_t k = 0; k < n; k++)
        *x = *x << 4 | (uint64_t)(hex[k] <= '9' ? hex[k] - '0' : 10 + hex[k] - 'a');
    return true;
}

static bool const_uint(v0 *v)
{
    const char *hex;
    size_t n;
    uint64_t x;
    if (!hex_nibbles(v, &hex, &n))
        return false;
    if (hex_u64(hex, n, &x))
        return v0_print_u64(v, x);
    return v0_print(v, "0x") && v0_emit(v, hex, n);
}

/* A character as Rust's Debug shows it in quotes; `quote` is the one
 * escaped. Non-ASCII characters are printed as they are. */
static bool print_quoted_char(v0 *v, uint32_t c, char quote)
{
    char esc[12];
    const char *e = NULL;
    switch (c) {
    case '\t':
        e = "\\t";
        break;
    case '\r':
        e = "\\r";
        break;
    case '\n':
        e = "\\n";
        break;
    case '\\':
        e = "\\\\";
        break;
    case '\0':
        e = "\\0";
        break;
    default:
        if (c == (uint32_t)quote) {
            esc[0] = '\\';
            esc[1] = quote;
            esc[2] = 0;
            e = esc;
        } else if (c < 0x20 || c == 0x7f) {
            static const char digits[] = "0123456789abcdef";
            memcpy(esc, "\\u{", 3);
            size_t k = 3;
            if (c >= 0x10)
                esc[k++] = digits[c >> 4];
            esc[k++] = digits[c & 15];
            esc[k++] = '}';
            esc[k] = 0;
            e = esc;
        }
    }
    return e != NULL ? v0_print(v, e) : v0_print_utf8(v, c);
}

/* The UTF-8 character at s[*at..n), advanced past; false when invalid. */
static bool utf8_next(const unsigned char *s, size_t n, size_t *at, uint32_t *c)
{
    unsigned char b = s[*at];
    size_t len = b < 0x80             ? 1
                 : (b & 0xe0) == 0xc0 ? 2
                 : (b & 0xf0) == 0xe0 ? 3
                 : (b & 0xf8) == 0xf0 ? 4
                                      : 0;
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (len == 0 || len > n - *at)
        return false;
    uint32_t x = len == 1 ? b : (uint32_t)(b & (0x7f >> len));
    for (size_t k = 1; k < len; k++) {
        if ((s[*at + k] & 0xc0) != 0x80)
            return false;
        x = x << 6 | (s[*at + k] & 0x3f);
    }
    if (x < min[len] || !v0_valid_char(x))
        return false;
    *at += len;
    *c = x;
    return true;
}

/* A `&str` constant: hex bytes "_", UTF-8, shown "...". */
static bool const_str(v0 *v)
{
    const char *hex;
    size_t n;
    if (!hex_nibbles(v, &hex, &n) || n % 2 != 0)
        return false;
    if (v->skip)
        return true;
    unsigned char bytes[MP_DEMANGLE_MAX_INPUT / 2];
    size_t nb = n / 2;
    if (nb > sizeof bytes)
        return false;
    for (size_t k = 0; k < nb; k++) {
        int hi = v0_base62_digit(hex[2 * k]), lo = v0_base62_digit(hex[2 * k + 1]);
        bytes[k] = (unsigned char)(hi << 4 | lo);
    }
    if (!v0_print(v, "\""))
        return false;
    for (size_t at = 0; at < nb;) {
        uint32_t c;
        if (!utf8_next(bytes, nb, &at, &c) || !print_quoted_char(v, c, '"'))
            return false;
    }
    return v0_print(v, "\"");
}

static bool const_elem(v0 *v) { return v0_konst(v, true); }

/* A struct constant's field: ident ":" const */
static bool const_field(v0 *v)
{
    uint64_t dis;
    ident id;
    return v0_opt_integer_62(v, 's', &dis) && v0_read_ident(v, &id) && v0_print_ident(v, &id) &&
           v0_print(v, ": ") && v0_konst(v, true);
}

/* A constant; outside an expression (`in_value` false: a generic
 * argument) compound ones are braced, `Foo<{ [1, 2] }>`-style. */
bool v0_konst(v0 *v, bool in_value)
{
    if (!enter(v))
        return false;
    int tag;
    bool ok = take(v, &tag);
    bool brace = false;
    if (ok && !in_value && strchr("eRQATV", tag) != NULL && !(tag == 'R' && peek(v) == 'e')) {
        ok = v0_print(v, "{");
        brace = true;
    }
    const char *hex;
    size_t n, count;
    uint64_t x;
    if (!ok) {
        v->depth--;
        return false;
    }
    switch (tag) {
    case 'p':
        ok = v0_print(v, "_");
        break;
    case 'h':
    case 't':
    case 'm':
    case 'y':
    case 'o':
    case 'j':
        ok = const_uint(v);
        break;
    case 'a':
    case 's':
    case 'l':
    case 'x':
    case 'n':
    case 'i':
        ok = (!eat(v, 'n') || v0_print(v, "-")) && const_uint(v);
        break;
    case 'b':
        ok = hex_nibbles(v, &hex, &n) && hex_u64(hex, n, &x) && x <= 1 &&
             v0_print(v, x ? "true" : "false");
        break;
    case 'c':
        ok = hex_nibbles(v, &hex, &n) && hex_u64(hex, n, &x) && v0_valid_char(x) &&
             v0_print(v, "'") && print_quoted_char(v, (uint32_t)x, '\'') && v0_print(v, "'");
        break;
    case 'e':
        ok = v0_print(v, "*") && const_str(v);
        break;
    case 'R':
    case 'Q':
        if (tag == 'R' && eat(v, 'e'))
            ok = const_str(v);
        else
            ok = v0_print(v, tag == 'R' ? "&" : "&mut ") && v0_konst(v, true);
        break;
    case 'A':
        ok = v0_print(v, "[") && v0_list(v, const_elem, ", ", NULL) && v0_print(v, "]");
        break;
    case 'T':
        ok = v0_print(v, "(") && v0_list(v, const_elem, ", ", &count) &&
             (count != 1 || v0_print(v, ",")) && v0_print(v, ")");
        break;
    case 'V':
        ok = v0_path(v, true) && take(v, &tag);
        if (!ok)
            break;
        if (tag == 'T')
            ok = v0_print(v, "(") && v0_list(v, const_elem, ", ", NULL) && v0_print(v, ")");
        else if (tag == 'S')
            ok = v0_print(v, " { ") && v0_list(v, const_field, ", ", NULL) && v0_print(v, " }");
        else
            ok = tag == 'U';
        break;
    case 'B':
        ok = v0_backref(v, in_value ? REF_CONST_VALUE : REF_CONST, NULL);
        break;
    default:
        ok = false;
    }
    ok = ok && (!brace || v0_print(v, "}"));
    v->depth--;
    return ok;
}
