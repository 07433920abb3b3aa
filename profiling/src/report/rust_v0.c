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
#include <string.h>

#include "demangle.h"
#include "rust_v0_parse.h"

/* --- the grammar -------------------------------------------------------- */

static bool type(v0 *v);
static bool path_open_generics(v0 *v, bool *open);

/* "B" base62, the tag read: re-reads the target (an earlier position)
 * when printing; reading without printing leaves it. */
bool v0_backref(v0 *v, enum v0_ref kind, bool *open)
{
    size_t at = v->next - 1;
    uint64_t target;
    if (!v0_integer_62(v, &target) || target >= at)
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
        ok = v0_path(v, kind == REF_PATH_VALUE);
        break;
    case REF_TYPE:
        ok = type(v);
        break;
    case REF_CONST:
    case REF_CONST_VALUE:
        ok = v0_konst(v, kind == REF_CONST_VALUE);
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
        return v0_integer_62(v, &lt) && v0_print_lifetime(v, lt);
    }
    if (eat(v, 'K'))
        return v0_konst(v, false);
    return type(v);
}

/* {item} "E", items separated by `sep`; *count receives how many. */
bool v0_list(v0 *v, bool (*item)(v0 *), const char *sep, size_t *count)
{
    size_t i = 0;
    while (!eat(v, 'E')) {
        if ((i > 0 && !v0_print(v, sep)) || !item(v))
            return false;
        i++;
    }
    if (count != NULL)
        *count = i;
    return true;
}

static bool generic_args(v0 *v) { return v0_list(v, generic_arg, ", ", NULL); }

bool v0_path(v0 *v, bool in_value)
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
        ok = v0_opt_integer_62(v, 's', &dis) && v0_read_ident(v, &id) && v0_print_ident(v, &id);
        break;
    case 'N': {
        int ns;
        if (!take(v, &ns) || !((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z')) ||
            !v0_path(v, in_value) || !v0_opt_integer_62(v, 's', &dis) || !v0_read_ident(v, &id)) {
            ok = false;
            break;
        }
        bool named = id.alen > 0 || id.plen > 0;
        if (ns >= 'a' && ns <= 'z') { /* plain namespaces: `::name` */
            ok = !named || (v0_print(v, "::") && v0_print_ident(v, &id));
            break;
        }
        /* special namespaces: `::{closure#0}`, `::{shim:vtable#0}` */
        char other[2] = {(char)ns, 0};
        ok = v0_print(v, "::{") &&
             v0_print(v, ns == 'C'   ? "closure"
                         : ns == 'S' ? "shim"
                                     : other) &&
             (!named || (v0_print(v, ":") && v0_print_ident(v, &id))) && v0_print(v, "#") &&
             v0_print_u64(v, dis) && v0_print(v, "}");
        break;
    }
    case 'M':
    case 'X':
    case 'Y':
        if (tag != 'Y') { /* the impl's own path is not shown */
            bool was = v->skip;
            v->skip = true;
            ok = v0_opt_integer_62(v, 's', &dis) && v0_path(v, false);
            v->skip = was;
            if (!ok)
                break;
        }
        ok = v0_print(v, "<") && type(v) &&
             (tag == 'M' || (v0_print(v, " as ") && v0_path(v, false))) && v0_print(v, ">");
        break;
    case 'I':
        ok = v0_path(v, in_value) && (!in_value || v0_print(v, "::")) && v0_print(v, "<") &&
             generic_args(v) && v0_print(v, ">");
        break;
    case 'B':
        ok = v0_backref(v, in_value ? REF_PATH_VALUE : REF_PATH, NULL);
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
    if (!v0_opt_integer_62(v, 'G', &bound))
        return false;
    if (v->skip)
        return f(v);
    if (bound > MP_V0_MAX_DEPTH)
        return false; /* more names than any real signature binds */
    if (bound > 0) {
        if (!v0_print(v, "for<"))
            return false;
        for (uint64_t i = 0; i < bound; i++) {
            v->bound_lifetimes++;
            if ((i > 0 && !v0_print(v, ", ")) || !v0_print_lifetime(v, 1))
                return false;
        }
        if (!v0_print(v, "> "))
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
        else if (!v0_read_ident(v, &abi) || abi.alen == 0 || abi.plen > 0)
            return false;
    }
    if (is_unsafe && !v0_print(v, "unsafe "))
        return false;
    if (has_abi) {
        if (!v0_print(v, "extern \""))
            return false;
        for (size_t k = 0; k < abi.alen; k++) /* `_` in the mangled ABI stands for `-` */
            if (!v0_emit(v, abi.ascii[k] == '_' ? "-" : &abi.ascii[k], 1))
                return false;
        if (!v0_print(v, "\" "))
            return false;
    }
    if (!v0_print(v, "fn(") || !v0_list(v, type, ", ", NULL) || !v0_print(v, ")"))
        return false;
    if (eat(v, 'u')) /* returns (): not shown */
        return true;
    return v0_print(v, " -> ") && type(v);
}

/* A path whose generic arguments may stay open for the associated type
 * bindings of a dyn trait (`Fn<(A,), Output = B>`). */
static bool path_open_generics(v0 *v, bool *open)
{
    if (eat(v, 'B')) {
        *open = false;
        return v0_backref(v, REF_OPEN, open);
    }
    if (eat(v, 'I')) {
        *open = true;
        return v0_path(v, false) && v0_print(v, "<") && generic_args(v);
    }
    *open = false;
    return v0_path(v, false);
}

/* dyn-trait = path {"p" ident type} */
static bool dyn_trait(v0 *v)
{
    bool open;
    if (!path_open_generics(v, &open))
        return false;
    while (eat(v, 'p')) {
        ident id;
        if (!v0_print(v, open ? ", " : "<"))
            return false;
        open = true;
        if (!v0_read_ident(v, &id) || !v0_print_ident(v, &id) || !v0_print(v, " = ") || !type(v))
            return false;
    }
    return !open || v0_print(v, ">");
}

static bool dyn_traits(v0 *v) { return v0_list(v, dyn_trait, " + ", NULL); }

static bool type(v0 *v)
{
    int tag = peek(v);
    const char *basic = basic_type(tag);
    if (basic != NULL) {
        v->next++;
        return spend(v, 1) && v0_print(v, basic);
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
        ok = spend(v, 1) && v0_print(v, "&");
        if (ok && eat(v, 'L'))
            ok = v0_integer_62(v, &lt) &&
                 (lt == 0 || (v0_print_lifetime(v, lt) && v0_print(v, " ")));
        ok = ok && (tag == 'R' || v0_print(v, "mut ")) && type(v);
        break;
    case 'P':
    case 'O':
        v->next++;
        ok = spend(v, 1) && v0_print(v, tag == 'P' ? "*const " : "*mut ") && type(v);
        break;
    case 'A':
    case 'S':
        v->next++;
        ok = spend(v, 1) && v0_print(v, "[") && type(v) &&
             (tag == 'S' || (v0_print(v, "; ") && v0_konst(v, true))) && v0_print(v, "]");
        break;
    case 'T':
        v->next++;
        ok = spend(v, 1) && v0_print(v, "(") && v0_list(v, type, ", ", &count) &&
             (count != 1 || v0_print(v, ",")) && v0_print(v, ")");
        break;
    case 'F':
        v->next++;
        ok = spend(v, 1) && in_binder(v, fn_sig);
        break;
    case 'D':
        v->next++;
        ok = spend(v, 1) && v0_print(v, "dyn ") && in_binder(v, dyn_traits) && eat(v, 'L') &&
             v0_integer_62(v, &lt) && (lt == 0 || (v0_print(v, " + ") && v0_print_lifetime(v, lt)));
        break;
    case 'B':
        v->next++;
        ok = spend(v, 1) && v0_backref(v, REF_TYPE, NULL);
        break;
    default:
        ok = v0_path(v, false);
    }
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
        if (v0_base62_digit(c) < 0 && c != '_')
            return -1;
        if (++v.len > MP_DEMANGLE_MAX_INPUT)
            return -1;
    }
    /* first pass: the whole name reads well (instantiating crate too) */
    bool ok = v0_path(&v, true) && (peek(&v) < 'A' || peek(&v) > 'Z' || v0_path(&v, false)) &&
              v.next == v.len;
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
        ok = v0_path(&v, true) && v.olen > 0;
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
