/* SPDX-License-Identifier: MIT */
/* The process's drop pattern (mp_prof_set_drop_frames): the allocator's
 * entry points, plus the caller's own, compiled once (POSIX extended
 * regular expressions, anchored as pprof anchors `drop_frames`) and read
 * by every report under one lock.
 *
 * The default set is written in the common subset of POSIX ERE and Go's
 * RE2, so `go tool pprof` reading the profile's drop_frames matches what
 * was matched here. Frames whose only job is to obtain memory are in it;
 * code that does more (a container's growth: std::vector's
 * _M_realloc_insert, Rust's Vec::push) is not. Rust's RawVec is in it:
 * alloc::raw_vec is the buffer-allocating half of Vec, String and
 * VecDeque (grow_one, finish_grow), and keeping it would head every Rust
 * profile with finish_grow, as keeping runtime.growslice would Go's
 * (which pprof drops with runtime.*). Box::new, Vec::with_capacity and
 * String::with_capacity, like C++'s make_unique, are ways of saying
 * `new`: their caller is the site.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fnmatch.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "drop.h"

#define MP_DROP_EXTRA_MAX 4096

static const char g_default[] =
    /* the malloc family, glibc's internal names */
    "malloc|calloc|realloc|reallocarray|memalign|aligned_alloc|(__)?posix_memalign|p?valloc|"
    "__libc_(malloc|calloc|realloc|memalign|valloc|pvalloc)|"
    /* every operator new/new[] overload (names carry no parameters) */
    "operator new(\\[\\])?|"
    /* libstdc++'s and libc++'s allocator wrappers */
    "(std::(__1::)?|__gnu_cxx::)(__new_allocator|new_allocator|allocator|allocator_traits|"
    "__alloc_traits)<.*>::allocate|"
    "std::(__1::)?(__libcpp_allocate|__libcpp_operator_new|__allocate_at_least)(<.*>)?|"
    "std::_Vector_base<.*>::_M_allocate|std::_Rb_tree<.*>::_M_get_node|"
    "std::__detail::_Hashtable_alloc<.*>::_M_allocate_(node|buckets)|"
    "std::(__cxx11::)?basic_string<.*>::_M_create|"
    /* C++'s other spellings of new: make_unique/make_shared (their
     * internals, inlined beneath them in `lines`, go with them) */
    "std::(__1::)?(make_unique|make_shared|allocate_shared)(<.*>)?|"
    /* Rust: the global allocator's shims, alloc::alloc, std::alloc, RawVec */
    "(__rustc::)?__r(ust|dl|g)_(alloc|alloc_zeroed|realloc)|"
    "<?alloc::alloc::.*|<?std::alloc::.*|<?alloc::raw_vec::.*|"
    /* Rust's spellings of new (inlined beneath the site in `lines`) */
    "(alloc::boxed::Box<.*>|<alloc::boxed::Box<.*>>)::new(_uninit|_zeroed)?|"
    "alloc::boxed::box_new(_uninit)?|"
    "(alloc::vec::Vec<.*>|<alloc::vec::Vec<.*>>)::with_capacity(_in)?|"
    "(alloc::string::String|<alloc::string::String>)::with_capacity";

/* g_default, alternative by alternative, as shell patterns (fnmatch:
 * `*` is `.*`), matched without compiling a regular expression: glibc's
 * regcomp of g_default costs ~1 ms and ~160 KiB, more than a periodic
 * report. test_drop.c checks that the two agree. */
static const char *const g_globs[] = {
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "memalign",
    "aligned_alloc",
    "posix_memalign",
    "__posix_memalign",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "operator new",
    "operator new\\[\\]",
    "std::__new_allocator<*>::allocate",
    "std::new_allocator<*>::allocate",
    "std::allocator<*>::allocate",
    "std::allocator_traits<*>::allocate",
    "std::__alloc_traits<*>::allocate",
    "std::__1::__new_allocator<*>::allocate",
    "std::__1::new_allocator<*>::allocate",
    "std::__1::allocator<*>::allocate",
    "std::__1::allocator_traits<*>::allocate",
    "std::__1::__alloc_traits<*>::allocate",
    "__gnu_cxx::__new_allocator<*>::allocate",
    "__gnu_cxx::new_allocator<*>::allocate",
    "__gnu_cxx::allocator<*>::allocate",
    "__gnu_cxx::allocator_traits<*>::allocate",
    "__gnu_cxx::__alloc_traits<*>::allocate",
    "std::__libcpp_allocate",
    "std::__libcpp_allocate<*>",
    "std::__libcpp_operator_new",
    "std::__libcpp_operator_new<*>",
    "std::__allocate_at_least",
    "std::__allocate_at_least<*>",
    "std::make_unique",
    "std::make_unique<*>",
    "std::make_shared",
    "std::make_shared<*>",
    "std::allocate_shared",
    "std::allocate_shared<*>",
    "std::__1::__libcpp_allocate",
    "std::__1::__libcpp_allocate<*>",
    "std::__1::__libcpp_operator_new",
    "std::__1::__libcpp_operator_new<*>",
    "std::__1::__allocate_at_least",
    "std::__1::__allocate_at_least<*>",
    "std::__1::make_unique",
    "std::__1::make_unique<*>",
    "std::__1::make_shared",
    "std::__1::make_shared<*>",
    "std::__1::allocate_shared",
    "std::__1::allocate_shared<*>",
    "std::_Vector_base<*>::_M_allocate",
    "std::_Rb_tree<*>::_M_get_node",
    "std::__detail::_Hashtable_alloc<*>::_M_allocate_node",
    "std::__detail::_Hashtable_alloc<*>::_M_allocate_buckets",
    "std::basic_string<*>::_M_create",
    "std::__cxx11::basic_string<*>::_M_create",
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rdl_alloc",
    "__rdl_alloc_zeroed",
    "__rdl_realloc",
    "__rg_alloc",
    "__rg_alloc_zeroed",
    "__rg_realloc",
    "__rustc::__rust_alloc",
    "__rustc::__rust_alloc_zeroed",
    "__rustc::__rust_realloc",
    "__rustc::__rdl_alloc",
    "__rustc::__rdl_alloc_zeroed",
    "__rustc::__rdl_realloc",
    "__rustc::__rg_alloc",
    "__rustc::__rg_alloc_zeroed",
    "__rustc::__rg_realloc",
    "alloc::alloc::*",
    "<alloc::alloc::*",
    "std::alloc::*",
    "<std::alloc::*",
    "alloc::raw_vec::*",
    "<alloc::raw_vec::*",
    "alloc::boxed::Box<*>::new",
    "alloc::boxed::Box<*>::new_uninit",
    "alloc::boxed::Box<*>::new_zeroed",
    "alloc::vec::Vec<*>::with_capacity",
    "alloc::vec::Vec<*>::with_capacity_in",
    "alloc::string::String::with_capacity",
    "<alloc::boxed::Box<*>>::new",
    "<alloc::boxed::Box<*>>::new_uninit",
    "<alloc::boxed::Box<*>>::new_zeroed",
    "<alloc::vec::Vec<*>>::with_capacity",
    "<alloc::vec::Vec<*>>::with_capacity_in",
    "<alloc::string::String>::with_capacity",
    "alloc::boxed::box_new",
    "alloc::boxed::box_new_uninit",

};

/* The setting: NULL is the default set alone. A setting is never freed
 * once published (a report in another thread may be reading its
 * pattern; mp_prof_set_drop_frames is a start-up call, so a process keeps
 * one or two): no lock, so no report can wait on one, nor a fork child
 * inherit one held. Each report compiles its own regex_t (glibc's
 * regexec takes a lock inside the pattern). */
typedef struct setting {
    struct setting *prev; /* the one it replaced, kept reachable */
    bool nothing;
    const char *extra; /* the caller's part of pattern, NULL: none */
    char pattern[];    /* "" with nothing */
} setting;

static _Atomic(setting *) g_setting;

const char *mp_prof_drop_frames_default(void) { return g_default; }

/* Compiles `^(pattern)$`; false when it is not a regular expression. */
static bool compile(regex_t *rx, const char *pattern, bool *nomem)
{
    size_t n = strlen(pattern);
    char *a = malloc(n + 5);
    *nomem = a == NULL;
    if (a == NULL)
        return false;
    memcpy(a, "^(", 2);
    memcpy(a + 2, pattern, n);
    memcpy(a + 2 + n, ")$", 3);
    int rc = regcomp(rx, a, REG_EXTENDED | REG_NOSUB);
    free(a);
    *nomem = rc == REG_ESPACE;
    return rc == 0;
}

/* Whether the pattern's groups close only what they open: `a)|(b` is
 * a regular expression, but joined into `^(default|a)|(b)$` it would no
 * longer be anchored (pprof joins the same way). Escapes and bracket
 * expressions are skipped. */
static bool groups_balanced(const char *p)
{
    int depth = 0;
    for (size_t i = 0; p[i] != '\0'; i++) {
        if (p[i] == '\\' && p[i + 1] != '\0') {
            i++;
        } else if (p[i] == '[') {
            size_t j = i + 1;
            if (p[j] == '^')
                j++;
            if (p[j] == ']')
                j++; /* a leading ] is a member */
            while (p[j] != '\0' && p[j] != ']')
                j++;
            if (p[j] == '\0')
                return false;
            i = j;
        } else if (p[i] == '(') {
            depth++;
        } else if (p[i] == ')' && --depth < 0) {
            return false;
        }
    }
    return depth == 0;
}

mp_prof_status mp_prof_set_drop_frames(const char *extra, mp_prof_drop_mode mode)
{
    if (mode != MP_PROF_DROP_ALLOCATOR && mode != MP_PROF_DROP_NOTHING)
        return MP_PROF_E_INVALID_CONFIG;
    size_t n = mode == MP_PROF_DROP_ALLOCATOR && extra != NULL ? strlen(extra) : 0;
    if (n > MP_DROP_EXTRA_MAX)
        return MP_PROF_E_INVALID_CONFIG;
    bool nomem = false;
    if (n > 0) {
        regex_t rx;
        if (!groups_balanced(extra))
            return MP_PROF_E_INVALID_CONFIG;
        if (!compile(&rx, extra, &nomem))
            return nomem ? MP_PROF_E_NOMEM : MP_PROF_E_INVALID_CONFIG;
        regfree(&rx);
    }
    setting *set = malloc(sizeof *set + sizeof g_default + 1 + n);
    if (set == NULL)
        return MP_PROF_E_NOMEM;
    set->nothing = mode == MP_PROF_DROP_NOTHING;
    set->extra = NULL;
    set->pattern[0] = '\0';
    if (!set->nothing) {
        memcpy(set->pattern, g_default, sizeof g_default);
        if (n > 0) {
            set->pattern[sizeof g_default - 1] = '|';
            memcpy(set->pattern + sizeof g_default, extra, n + 1);
            set->extra = set->pattern + sizeof g_default;
        }
    }
    set->prev = atomic_load_explicit(&g_setting, memory_order_acquire);
    while (!atomic_compare_exchange_weak_explicit(&g_setting, &set->prev, set, memory_order_acq_rel,
                                                  memory_order_acquire))
        ;
    return MP_PROF_OK;
}

bool mp_drop_compile(mp_drop *d, const char *pattern)
{
    *d = (mp_drop){.pattern = pattern};
    if (pattern == NULL)
        return false;
    /* the default set, and what was added to it, as a setting holds them */
    size_t n = sizeof g_default - 1;
    const char *rest = pattern;
    if (strncmp(pattern, g_default, n) == 0 && (pattern[n] == '\0' || pattern[n] == '|')) {
        d->defaults = true;
        rest = pattern[n] == '|' ? pattern + n + 1 : NULL;
    }
    bool nomem;
    if (rest != NULL && !compile(&d->own, rest, &nomem)) {
        d->defaults = false;
        return false;
    }
    d->owned = rest != NULL;
    d->ready = true;
    return true;
}

void mp_drop_begin(mp_drop *d)
{
    const setting *set = atomic_load_explicit(&g_setting, memory_order_acquire);
    *d = (mp_drop){.pattern = set == NULL ? g_default : set->nothing ? NULL : set->pattern};
    if (d->pattern == NULL)
        return;
    d->defaults = true;
    d->ready = true;
    bool nomem;
    /* the caller's part, compiled for this report (a regex_t of its own:
     * glibc's regexec locks inside it); one that cannot be compiled now
     * (out of memory) drops nothing this time */
    if (set != NULL && set->extra != NULL)
        d->owned = compile(&d->own, set->extra, &nomem);
}

void mp_drop_end(mp_drop *d)
{
    if (d->owned)
        regfree(&d->own);
    d->ready = d->owned = d->defaults = false;
}

bool mp_drop_default_matches(const char *name)
{
    for (size_t i = 0; i < sizeof g_globs / sizeof g_globs[0]; i++) {
        const char *g = g_globs[i];
        size_t lit = strcspn(g, "*[\\");
        if (strncmp(name, g, lit) != 0)
            continue;
        if (g[lit] == '\0' ? name[lit] == '\0' : fnmatch(g, name, 0) == 0)
            return true;
    }
    return false;
}

/* pprof's simplifyFunc: the name up to its first '(' that does not
 * open "(anonymous namespace)" or "operator()". */
static size_t simple_length(const char *name)
{
    static const char anon[] = "(anonymous namespace)", call[] = "operator()";
    size_t i = 0;
    while (name[i] != '\0') {
        if (strncmp(name + i, anon, sizeof anon - 1) == 0)
            i += sizeof anon - 1;
        else if (strncmp(name + i, call, sizeof call - 1) == 0)
            i += sizeof call - 1;
        else if (name[i] == '(')
            return i;
        else
            i++;
    }
    return i;
}

static bool match_simple(mp_drop *d, const char *s)
{
    return (d->defaults && mp_drop_default_matches(s)) ||
           (d->owned && regexec(&d->own, s, 0, NULL, 0) == 0);
}

bool mp_drop_matches(mp_drop *d, const char *name)
{
    if (!d->ready || name == NULL)
        return false;
    size_t n = simple_length(name);
    if (name[n] == '\0')
        return match_simple(d, name);
    char buf[512];
    char *s = n < sizeof buf ? buf : malloc(n + 1);
    if (s == NULL)
        return false;
    memcpy(s, name, n);
    s[n] = '\0';
    bool m = match_simple(d, s);
    if (s != buf)
        free(s);
    return m;
}
