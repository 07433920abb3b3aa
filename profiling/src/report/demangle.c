/* SPDX-License-Identifier: MIT */
/* Linkage names -> human names (see demangle.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "demangle.h"

#include <setjmp.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "rust_v0.h"

#if MP_HAVE_LIBIBERTY
#include <libiberty/demangle.h>
#endif

bool mp_demangle_available(void) { return MP_HAVE_LIBIBERTY != 0; }

bool mp_demangle_looks_mangled(const char *name)
{
    return (name != NULL && name[0] == '_' && name[1] == 'Z') || mp_rust_v0_looks_mangled(name);
}

#if MP_HAVE_LIBIBERTY
/* The demangler's output, collected in pieces into a fixed buffer.
 *
 * Invariant: the walk never prints more than MP_DEMANGLE_MAX_OUTPUT bytes.
 * Both demanglers re-walk a back-reference each time it is printed, so a
 * short name can print exponentially much (a 201-byte Rust v0 name found
 * by fuzz_demangle ran for minutes); for the C++ and Rust legacy
 * demanglers the time of a walk is proportional to what it prints, so
 * bounding the output bounds the time (v0 names go to rust_v0.c, which
 * also bounds its work: demangle.h says why). Past the
 * bound, put() leaves the walk with siglongjmp: the callback API keeps
 * all its state on the stack (no malloc, no lock), so unwinding its
 * frames leaks nothing. */
typedef struct sink {
    char *out;
    size_t cap, len;
    sigjmp_buf too_long;
} sink;

static void put(const char *s, size_t n, void *arg)
{
    sink *k = arg;
    if (n > MP_DEMANGLE_MAX_OUTPUT - k->len)
        siglongjmp(k->too_long, 1);
    if (k->len < k->cap) {
        size_t room = k->cap - k->len;
        memcpy(k->out + k->len, s, n < room ? n : room);
    }
    k->len += n;
}

/* DMGL_ANSI keeps const/volatile of template arguments; no DMGL_PARAMS:
 * the top-level function's parameters, return type and clone suffix
 * (.cold, .constprop.0) are left out, so an overload set and a function's
 * clones share one name (the rule documented at mp_prof_demangle). */
#define MP_DMGL_OPTIONS DMGL_ANSI

static long run(int (*fn)(const char *, int, demangle_callbackref, void *), const char *name,
                char *out, size_t cap)
{
    sink k = {.out = out, .cap = cap, .len = 0};
    /* Savemask 0: no system call; the walk changes no signal mask. */
    if (sigsetjmp(k.too_long, 0) != 0)
        return -1;
    if (!fn(name, MP_DMGL_OPTIONS, put, &k) || k.len == 0)
        return -1;
    if (cap > 0)
        out[k.len < cap ? k.len : cap - 1] = '\0';
    return (long)k.len;
}
#endif

long mp_demangle(const char *name, char *out, size_t cap)
{
    if (!mp_demangle_looks_mangled(name) ||
        strnlen(name, MP_DEMANGLE_MAX_INPUT + 1) > MP_DEMANGLE_MAX_INPUT)
        return -1;
    if (mp_rust_v0_looks_mangled(name))
        return mp_rust_v0_demangle(name, out, cap, NULL);
#if MP_HAVE_LIBIBERTY
    /* Rust first: a Rust legacy name is also a valid C++ name, but only
     * the Rust reading drops its hash (`::h0123456789abcdef`). */
    long n = run(rust_demangle_callback, name, out, cap);
    return n >= 0 ? n : run(cplus_demangle_v3_callback, name, out, cap);
#else
    (void)out;
    (void)cap;
    return -1;
#endif
}

mp_prof_status mp_prof_demangle(const char *name, char *out, size_t cap, size_t *len)
{
    if (name == NULL || (out == NULL && cap > 0) || len == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    if (!mp_demangle_available() && !mp_rust_v0_looks_mangled(name))
        return MP_PROF_E_UNSUPPORTED;
    long n = mp_demangle(name, out, cap);
    if (n < 0)
        return MP_PROF_E_NOT_MANGLED;
    *len = (size_t)n;
    return MP_PROF_OK;
}
