/* SPDX-License-Identifier: MIT */
/* Internal: Rust v0 linkage names (`_R...`, RFC 2603; rustc's "v0 Symbol
 * Format") -> human names, bounded.
 *
 * Written here rather than taken from libiberty because libiberty's v0
 * demangler could not be bounded from outside: it has short inputs it
 * walks for minutes (one printing exponentially much, one printing
 * nothing: both in fuzz/corpus/demangle). This one keeps three budgets,
 * and past any of them it refuses (the name stays as it is):
 *
 * - work: every byte the parser reads counts one unit, and a
 *   back-reference re-reads its target each time it is printed, so the
 *   count covers the exponential re-walks whether they print or not;
 * - output: MP_DEMANGLE_MAX_OUTPUT bytes of human name;
 * - depth: nesting of paths, types, constants and back-references (the
 *   recursion is on the caller's stack, ~100 bytes a level).
 *
 * The human form is rustc-demangle's alternate one (`{:#}`): no crate
 * disambiguators and no type suffixes on constants, e.g.
 * `_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal` ->
 * `std::rt::lang_start_internal`; generic arguments `::<T>` in value
 * paths and `<T>` in types, impls `<Type as Trait>::f`, closures
 * `{closure#0}`. A `.suffix` (`.llvm.123`, `.cold`) is left out, as the
 * naming rule drops C++ clone suffixes. Known difference: characters in
 * `char` and `&str` constants are escaped for ASCII controls only (Rust
 * also escapes non-printable Unicode).
 *
 * Allocates nothing, takes no lock, reentrant; never from an allocation
 * hook (it needs a few KiB of stack plus ~100 bytes a level of depth).
 */
#ifndef MIMPROF_PROFILING_REPORT_RUST_V0_H
#define MIMPROF_PROFILING_REPORT_RUST_V0_H

#include <stdbool.h>
#include <stddef.h>

/* Nesting bound (paths, types, constants, back-references). The deepest
 * among the names of rustc 1.95's std and of the reference pairs is far
 * below (see tests/report/test_demangle_v0.c). */
#define MP_V0_MAX_DEPTH 200

/* Work bound: bytes read, re-reads of back-references included, over
 * the passes of one call. The real names of the tests take at most 2,469
 * (an output near the 16 KiB bound would take ~40,000 at their ratio); a
 * call that reaches the bound has spent ~3 M instructions (callgrind:
 * ~48 a unit), about a millisecond. */
#define MP_V0_MAX_WORK (1u << 16)

/* Whether `name` has a v0 prefix (`_R` followed by an uppercase letter,
 * the start of every path); says nothing about it being valid. */
bool mp_rust_v0_looks_mangled(const char *name);

/* Demangles the v0 name `name` into out[cap], snprintf-style as
 * mp_demangle (NUL-terminated when cap > 0). Returns
 * the length of the whole human name, or -1 when the name is not valid
 * v0, prints nothing, or passes a budget. `*work` (may be NULL) receives
 * the work units spent, for tests and measurements. */
long mp_rust_v0_demangle(const char *name, char *out, size_t cap, unsigned long *work);

#endif
