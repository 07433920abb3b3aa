/* SPDX-License-Identifier: MIT */
/* Internal: the human name of a linkage name (see mp_prof_demangle in
 * <mimprof/profiling.h> for the rule and why it drops parameter lists).
 *
 * The demangler is GNU libiberty's callback API (cplus_demangle_v3_callback
 * for C++, rust_demangle_callback for Rust legacy names), linked
 * statically (feature `demangle`). It was chosen over libstdc++'s
 * __cxa_demangle because the callback API allocates nothing (its work
 * arrays are on the caller's stack: no malloc, so no lock and no path back
 * into a hooked allocator, whatever thread builds the report), it needs no
 * libstdc++ in a C program, and it reads Rust as well. D is left out: its
 * demangler has no callback API and exits the process when xmalloc fails.
 * Rust v0 names (_R...) are read by rust_v0.c instead, in every build:
 * libiberty's v0 demangler has short inputs (found by fuzz_demangle: 201
 * and 225 bytes) that it walks for minutes, one of them printing
 * nothing, which no bound on its output can stop; rust_v0.c bounds its
 * work, output and depth itself.
 *
 * Safe to call from any thread, reentrant; never from an allocation hook
 * (it uses up to ~80 KiB of stack for the longest accepted name).
 */
#ifndef MIMPROF_PROFILING_REPORT_DEMANGLE_H
#define MIMPROF_PROFILING_REPORT_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/* Longest linkage name handed to the demangler (bytes, NUL excluded).
 * libiberty sizes its work arrays on the stack by the input (~72 bytes a
 * byte) and itself refuses an input over this (two components a byte
 * against DEMANGLE_RECURSION_LIMIT, 2048): ~74 KiB of stack at most.
 * Longer names stay as they are. The longest in Debian 12's libstdc++
 * has 177. */
#define MP_DEMANGLE_MAX_INPUT 1024

/* Longest human name the demangler may print (bytes, NUL excluded); a
 * name whose human form is longer stays as it is. Back-references let a
 * short name print exponentially much, and the demangler's time grows
 * with what it prints: this bound is what keeps one name to
 * microseconds. The longest human name among the dynamic symbols of
 * Debian 12's libstdc++ has 240 bytes without parameters (661 with:
 * `nm -D libstdc++.so.6 | c++filt -p`); template-heavy code reaches a
 * few KiB. */
#define MP_DEMANGLE_MAX_OUTPUT 16384

/* Whether the C++ and Rust legacy demangler (libiberty) is built in;
 * Rust v0 names are demangled in every build. */
bool mp_demangle_available(void);

/* Whether `name` has the prefix of a name the demangler reads (_Z: C++
 * and Rust legacy; _R and an uppercase letter: Rust v0); says nothing
 * about it being valid. */
bool mp_demangle_looks_mangled(const char *name);

/* Demangles `name` into out[cap]. Returns the length of the whole human
 * name (out holds it NUL-terminated when it is < cap, else a truncated
 * prefix, as snprintf), or -1 when `name` is not mangled, is refused by
 * the demangler, is longer than MP_DEMANGLE_MAX_INPUT, would print more
 * than MP_DEMANGLE_MAX_OUTPUT, passes rust_v0.h's work or depth bound, or
 * no demangler for it is built in (then `name` is its own human name). */
long mp_demangle(const char *name, char *out, size_t cap);

#endif
