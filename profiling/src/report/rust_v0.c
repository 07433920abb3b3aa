/* SPDX-License-Identifier: MIT */
/* Rust v0 names -> human names, within budgets (see rust_v0.h).
 *
 * A recursive-descent reader that prints as it parses, following the
 * grammar of RFC 2603 as rustc documents it:
 *
 *   symbol  = "_R" path [instantiating-crate] ["." suffix]
 *   path    = "C" dis ident                    crate root
 *           | "M" dis path type                <T>            (inherent impl)
 *           | "X" dis path type path           <T as Trait>   (trait impl)
 *           | "Y" type path                    <T as Trait>
 *           | "N" ns path dis ident            nested (ns a-z: plain, A-Z: {closure#n})
 *           | "I" path {generic-arg} "E"       generic arguments
 *           | "B" base62                       back-reference
 *   generic-arg = "L" base62 (lifetime) | "K" const | type
 *
 * Passes over the name: the first reads it without printing (nor
 * following back-references, whose targets are read when printed) to
 * refuse malformed names early; the second prints without writing, to
 * refuse anything else (a budget, a bad back-reference target) before
 * `out` is touched; the third writes.
 * Every read byte counts against the work budget, in both passes and in
 * every re-read of a back-reference: that is what bounds a name whose
 * back-references nest exponentially, printing or not. */
#include "rust_v0.h"

#include <stdint.h>
#include <string.h>

#include "demangle.h"

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

/* --- reading ------------------------------------------------------------ */

static bool spend(v0 *v, size_t n)
{
    v->work += n;
    return v->work <= MP_V0_MAX_WORK;
}

static int peek(const v0 *v) { return v->next < v->len ? (unsigned char)v->sym[v->next] : -1; }

static bool take(v0 *v, int *c)
{
    if (v->next >= v->len || !spend(v, 1))
        return false;
    *c = (unsigned char)v->sym[v->next++];
    return true;
}

static bool eat(v0 *v, int c)
{
    if (peek(v) != c || !spend(v, 1))
        return false;
    v->next++;
    return true;
}

static bool enter(v0 *v) { return ++v->depth <= MP_V0_MAX_DEPTH; }

static int base62_digit(int c)
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
static bool integer_62(v0 *v, uint64_t *out)
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
        int d = base62_digit(c);
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
static bool opt_integer_62(v0 *v, int tag, uint64_t *out)
{
    *out = 0;
    if (!eat(v, tag))
        return true;
    if (!integer_62(v, out) || *out == UINT64_MAX)
        return false;
    *out += 1;
    return true;
}

typedef struct ident {
    const char *ascii, *puny;
    size_t alen, plen;
} ident;

/* ident = ["u"] decimal ["_"] bytes; with "u", the bytes are Punycode:
 * the ASCII part, "_", the deltas (the last "_" separates them). */
static bool read_ident(v0 *v, ident *id)
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

static bool emit(v0 *v, const char *s, size_t n)
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

static bool print(v0 *v, const char *s) { return emit(v, s, strlen(s)); }

static bool print_u64(v0 *v, uint64_t x)
{
    char buf[24];
    size_t i = sizeof buf;
    do {
        buf[--i] = (char)('0' + x % 10);
        x /= 10;
    } while (x != 0);
    return emit(v, buf + i, sizeof buf - i);
}

static bool print_utf8(v0 *v, uint32_t c)
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
    return emit(v, b, n);
}

static bool valid_char(uint64_t c) { return c <= 0x10ffff && (c < 0xd800 || c > 0xdfff); }

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
        if (!valid_char(code))
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

static bool print_ident(v0 *v, const ident *id)
{
    if (v->skip)
        return true;
    if (id->plen == 0)
        return emit(v, id->ascii, id->alen);
    uint32_t cps[V0_PUNY_MAX];
    size_t n;
    if (puny_decode(id, cps, &n)) {
        for (size_t k = 0; k < n; k++)
            if (!print_utf8(v, cps[k]))
                return false;
        return true;
    }
    if (!print(v, "punycode{"))
        return false;
    if (id->alen > 0 && (!emit(v, id->ascii, id->alen) || !print(v, "-")))
        return false;
    return emit(v, id->puny, id->plen) && print(v, "}");
}

/* '_ for 0, else the binder's name: 'a.. 'z, then '_26 on. */
static bool print_lifetime(v0 *v, uint64_t lt)
{
    if (!print(v, "'"))
        return false;
    if (lt == 0)
        return print(v, "_");
    if (v->skip)
        return true;
    if (lt > v->bound_lifetimes)
        return false;
    uint64_t d = v->bound_lifetimes - lt;
    if (d < 26) {
        char c = (char)('a' + d);
        return emit(v, &c, 1);
    }
    return print(v, "_") && print_u64(v, d);
}

/* --- the grammar -------------------------------------------------------- */

static bool path(v0 *v, bool in_value);
static bool type(v0 *v);
static bool konst(v0 *v, bool in_value);
static bool path_open_generics(v0 *v, bool *open);

enum ref_kind { REF_PATH, REF_PATH_VALUE, REF_TYPE, REF_CONST, REF_CONST_VALUE, REF_OPEN };

/* "B" base62, the tag read: re-reads the target (an earlier position)
 * when printing; reading without printing leaves it. */
static bool backref(v0 *v, enum ref_kind kind, bool *open)
{
    size_t at = v->next - 1;
    uint64_t target;
    if (!integer_62(v, &target) || target >= at)
        return false;
    if (v->skip)
        return true;
    if (!enter(v) || !spend(v, 1))
        return false;
    size_t resume = v->next;
    v->next = (size_t)target;
    bool ok;
    switch (kind) {
    case REF_PATH:
    case REF_PATH_VALUE:
        ok = path(v, kind == REF_PATH_VALUE);
        break;
    case REF_TYPE:
        ok = type(v);
        break;
    case REF_CONST:
    case REF_CONST_VALUE:
        ok = konst(v, kind == REF_CONST_VALUE);
        break;
    default:
        ok = path_open_generics(v, open);
    }
    v->next = resume;
    v->depth--;
    return ok;
}

static bool generic_arg(v0 *v)
{
    if (eat(v, 'L')) {
        uint64_t lt;
        return integer_62(v, &lt) && print_lifetime(v, lt);
    }
    if (eat(v, 'K'))
        return konst(v, false);
    return type(v);
}

/* {item} "E", items separated by `sep`; *count receives how many. */
static bool list(v0 *v, bool (*item)(v0 *), const char *sep, size_t *count)
{
    size_t i = 0;
    while (!eat(v, 'E')) {
        if ((i > 0 && !print(v, sep)) || !item(v))
            return false;
        i++;
    }
    if (count != NULL)
        *count = i;
    return true;
}

static bool generic_args(v0 *v) { return list(v, generic_arg, ", ", NULL); }

static bool path(v0 *v, bool in_value)
{
    if (!enter(v))
        return false;
    int tag;
    uint64_t dis;
    ident id;
    bool ok = take(v, &tag);
    if (!ok) {
        v->depth--;
        return false;
    }
    switch (tag) {
    case 'C':
        ok = opt_integer_62(v, 's', &dis) && read_ident(v, &id) && print_ident(v, &id);
        break;
    case 'N': {
        int ns;
        if (!take(v, &ns) || !((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z')) ||
            !path(v, in_value) || !opt_integer_62(v, 's', &dis) || !read_ident(v, &id)) {
            ok = false;
            break;
        }
        bool named = id.alen > 0 || id.plen > 0;
        if (ns >= 'a' && ns <= 'z') { /* plain namespaces: `::name` */
            ok = !named || (print(v, "::") && print_ident(v, &id));
            break;
        }
        /* special namespaces: `::{closure#0}`, `::{shim:vtable#0}` */
        char other[2] = {(char)ns, 0};
        ok = print(v, "::{") &&
             print(v, ns == 'C'   ? "closure"
                      : ns == 'S' ? "shim"
                                  : other) &&
             (!named || (print(v, ":") && print_ident(v, &id))) && print(v, "#") &&
             print_u64(v, dis) && print(v, "}");
        break;
    }
    case 'M':
    case 'X':
    case 'Y':
        if (tag != 'Y') { /* the impl's own path is not shown */
            bool was = v->skip;
            v->skip = true;
            ok = opt_integer_62(v, 's', &dis) && path(v, false);
            v->skip = was;
            if (!ok)
                break;
        }
        ok = print(v, "<") && type(v) && (tag == 'M' || (print(v, " as ") && path(v, false))) &&
             print(v, ">");
        break;
    case 'I':
        ok = path(v, in_value) && (!in_value || print(v, "::")) && print(v, "<") &&
             generic_args(v) && print(v, ">");
        break;
    case 'B':
        ok = backref(v, in_value ? REF_PATH_VALUE : REF_PATH, NULL);
        break;
    default:
        ok = false;
    }
    v->depth--;
    return ok;
}

static const char *basic_type(int tag)
{
    switch (tag) {
    case 'a':
        return "i8";
    case 'b':
        return "bool";
    case 'c':
        return "char";
    case 'd':
        return "f64";
    case 'e':
        return "str";
    case 'f':
        return "f32";
    case 'h':
        return "u8";
    case 'i':
        return "isize";
    case 'j':
        return "usize";
    case 'l':
        return "i32";
    case 'm':
        return "u32";
    case 'n':
        return "i128";
    case 'o':
        return "u128";
    case 'p':
        return "_";
    case 's':
        return "i16";
    case 't':
        return "u16";
    case 'u':
        return "()";
    case 'v':
        return "...";
    case 'x':
        return "i64";
    case 'y':
        return "u64";
    case 'z':
        return "!";
    default:
        return NULL;
    }
}

/* ["G" base62]: lifetimes bound by `for<...>` around f. */
static bool in_binder(v0 *v, bool (*f)(v0 *))
{
    uint64_t bound;
    if (!opt_integer_62(v, 'G', &bound))
        return false;
    if (v->skip)
        return f(v);
    if (bound > MP_V0_MAX_DEPTH)
        return false; /* more names than any real signature binds */
    if (bound > 0) {
        if (!print(v, "for<"))
            return false;
        for (uint64_t i = 0; i < bound; i++) {
            v->bound_lifetimes++;
            if ((i > 0 && !print(v, ", ")) || !print_lifetime(v, 1))
                return false;
        }
        if (!print(v, "> "))
            return false;
    }
    bool ok = f(v);
    v->bound_lifetimes -= bound;
    return ok;
}

/* fn-sig = ["U"] ["K" abi] {type} "E" type (the binder read) */
static bool fn_sig(v0 *v)
{
    bool is_unsafe = eat(v, 'U');
    ident abi = {0};
    bool has_abi = eat(v, 'K');
    if (has_abi) {
        if (eat(v, 'C'))
            abi = (ident){.ascii = "C", .alen = 1};
        else if (!read_ident(v, &abi) || abi.alen == 0 || abi.plen > 0)
            return false;
    }
    if (is_unsafe && !print(v, "unsafe "))
        return false;
    if (has_abi) {
        if (!print(v, "extern \""))
            return false;
        for (size_t k = 0; k < abi.alen; k++) /* `_` in the mangled ABI stands for `-` */
            if (!emit(v, abi.ascii[k] == '_' ? "-" : &abi.ascii[k], 1))
                return false;
        if (!print(v, "\" "))
            return false;
    }
    if (!print(v, "fn(") || !list(v, type, ", ", NULL) || !print(v, ")"))
        return false;
    if (eat(v, 'u')) /* returns (): not shown */
        return true;
    return print(v, " -> ") && type(v);
}

/* A path whose generic arguments may stay open for the associated type
 * bindings of a dyn trait (`Fn<(A,), Output = B>`). */
static bool path_open_generics(v0 *v, bool *open)
{
    if (eat(v, 'B')) {
        *open = false;
        return backref(v, REF_OPEN, open);
    }
    if (eat(v, 'I')) {
        *open = true;
        return path(v, false) && print(v, "<") && generic_args(v);
    }
    *open = false;
    return path(v, false);
}

/* dyn-trait = path {"p" ident type} */
static bool dyn_trait(v0 *v)
{
    bool open;
    if (!path_open_generics(v, &open))
        return false;
    while (eat(v, 'p')) {
        ident id;
        if (!print(v, open ? ", " : "<"))
            return false;
        open = true;
        if (!read_ident(v, &id) || !print_ident(v, &id) || !print(v, " = ") || !type(v))
            return false;
    }
    return !open || print(v, ">");
}

static bool dyn_traits(v0 *v) { return list(v, dyn_trait, " + ", NULL); }

static bool type(v0 *v)
{
    int tag = peek(v);
    const char *basic = basic_type(tag);
    if (basic != NULL) {
        v->next++;
        return spend(v, 1) && print(v, basic);
    }
    if (!enter(v))
        return false;
    bool ok;
    size_t count;
    uint64_t lt;
    switch (tag) {
    case 'R':
    case 'Q':
        v->next++;
        ok = spend(v, 1) && print(v, "&");
        if (ok && eat(v, 'L'))
            ok = integer_62(v, &lt) && (lt == 0 || (print_lifetime(v, lt) && print(v, " ")));
        ok = ok && (tag == 'R' || print(v, "mut ")) && type(v);
        break;
    case 'P':
    case 'O':
        v->next++;
        ok = spend(v, 1) && print(v, tag == 'P' ? "*const " : "*mut ") && type(v);
        break;
    case 'A':
    case 'S':
        v->next++;
        ok = spend(v, 1) && print(v, "[") && type(v) &&
             (tag == 'S' || (print(v, "; ") && konst(v, true))) && print(v, "]");
        break;
    case 'T':
        v->next++;
        ok = spend(v, 1) && print(v, "(") && list(v, type, ", ", &count) &&
             (count != 1 || print(v, ",")) && print(v, ")");
        break;
    case 'F':
        v->next++;
        ok = spend(v, 1) && in_binder(v, fn_sig);
        break;
    case 'D':
        v->next++;
        ok = spend(v, 1) && print(v, "dyn ") && in_binder(v, dyn_traits) && eat(v, 'L') &&
             integer_62(v, &lt) && (lt == 0 || (print(v, " + ") && print_lifetime(v, lt)));
        break;
    case 'B':
        v->next++;
        ok = spend(v, 1) && backref(v, REF_TYPE, NULL);
        break;
    default:
        ok = path(v, false);
    }
    v->depth--;
    return ok;
}

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
        return print_u64(v, x);
    return print(v, "0x") && emit(v, hex, n);
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
    return e != NULL ? print(v, e) : print_utf8(v, c);
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
    if (x < min[len] || !valid_char(x))
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
        int hi = base62_digit(hex[2 * k]), lo = base62_digit(hex[2 * k + 1]);
        bytes[k] = (unsigned char)(hi << 4 | lo);
    }
    if (!print(v, "\""))
        return false;
    for (size_t at = 0; at < nb;) {
        uint32_t c;
        if (!utf8_next(bytes, nb, &at, &c) || !print_quoted_char(v, c, '"'))
            return false;
    }
    return print(v, "\"");
}

static bool const_elem(v0 *v) { return konst(v, true); }

/* A struct constant's field: ident ":" const */
static bool const_field(v0 *v)
{
    uint64_t dis;
    ident id;
    return opt_integer_62(v, 's', &dis) && read_ident(v, &id) && print_ident(v, &id) &&
           print(v, ": ") && konst(v, true);
}

/* A constant; outside an expression (`in_value` false: a generic
 * argument) compound ones are braced, `Foo<{ [1, 2] }>`-style. */
static bool konst(v0 *v, bool in_value)
{
    if (!enter(v))
        return false;
    int tag;
    bool ok = take(v, &tag);
    bool brace = false;
    if (ok && !in_value && strchr("eRQATV", tag) != NULL && !(tag == 'R' && peek(v) == 'e')) {
        ok = print(v, "{");
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
        ok = print(v, "_");
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
        ok = (!eat(v, 'n') || print(v, "-")) && const_uint(v);
        break;
    case 'b':
        ok = hex_nibbles(v, &hex, &n) && hex_u64(hex, n, &x) && x <= 1 &&
             print(v, x ? "true" : "false");
        break;
    case 'c':
        ok = hex_nibbles(v, &hex, &n) && hex_u64(hex, n, &x) && valid_char(x) && print(v, "'") &&
             print_quoted_char(v, (uint32_t)x, '\'') && print(v, "'");
        break;
    case 'e':
        ok = print(v, "*") && const_str(v);
        break;
    case 'R':
    case 'Q':
        if (tag == 'R' && eat(v, 'e'))
            ok = const_str(v);
        else
            ok = print(v, tag == 'R' ? "&" : "&mut ") && konst(v, true);
        break;
    case 'A':
        ok = print(v, "[") && list(v, const_elem, ", ", NULL) && print(v, "]");
        break;
    case 'T':
        ok = print(v, "(") && list(v, const_elem, ", ", &count) && (count != 1 || print(v, ",")) &&
             print(v, ")");
        break;
    case 'V':
        ok = path(v, true) && take(v, &tag);
        if (!ok)
            break;
        if (tag == 'T')
            ok = print(v, "(") && list(v, const_elem, ", ", NULL) && print(v, ")");
        else if (tag == 'S')
            ok = print(v, " { ") && list(v, const_field, ", ", NULL) && print(v, " }");
        else
            ok = tag == 'U';
        break;
    case 'B':
        ok = backref(v, in_value ? REF_CONST_VALUE : REF_CONST, NULL);
        break;
    default:
        ok = false;
    }
    ok = ok && (!brace || print(v, "}"));
    v->depth--;
    return ok;
}

/* --- entry -------------------------------------------------------------- */

bool mp_rust_v0_looks_mangled(const char *name)
{
    return name != NULL && name[0] == '_' && name[1] == 'R' && name[2] >= 'A' && name[2] <= 'Z';
}

long mp_rust_v0_demangle(const char *name, char *out, size_t cap, unsigned long *work)
{
    if (work != NULL)
        *work = 0;
    if (!mp_rust_v0_looks_mangled(name))
        return -1;
    v0 v = {.sym = name + 2, .out = out, .cap = cap, .skip = true};
    /* the mangled part ends at the suffix ("." on) or the end; only
     * [A-Za-z0-9_] belong to it */
    while (v.sym[v.len] != '\0' && v.sym[v.len] != '.') {
        int c = (unsigned char)v.sym[v.len];
        if (base62_digit(c) < 0 && c != '_')
            return -1;
        if (++v.len > MP_DEMANGLE_MAX_INPUT)
            return -1;
    }
    /* first pass: the whole name reads well (instantiating crate too) */
    bool ok =
        path(&v, true) && (peek(&v) < 'A' || peek(&v) > 'Z' || path(&v, false)) && v.next == v.len;
    /* second pass: prints, counting only, so that a name refused midway
     * leaves `out` untouched; the third writes, and repeats the second
     * step for step (same input, same work count: it cannot fail) */
    unsigned long read = v.work;
    for (int pass = 2; ok && pass <= 3; pass++) {
        v.next = 0;
        v.skip = false;
        v.olen = 0;
        v.work = read;
        v.out = pass == 2 ? NULL : out;
        v.cap = pass == 2 ? 0 : cap;
        ok = path(&v, true) && v.olen > 0;
        if (cap == 0)
            break;
    }
    if (work != NULL)
        *work = v.work;
    if (!ok)
        return -1;
    if (cap > 0)
        out[v.olen < cap ? v.olen : cap - 1] = '\0';
    return (long)v.olen;
}
