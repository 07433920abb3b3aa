/* SPDX-License-Identifier: MIT */
/* Rust v0 names (src/report/rust_v0.c, through mp_prof_demangle):
 *
 * - every pair of rust_v0/v0_pairs.tsv: real v0 names (rustc 1.95's std,
 *   core and alloc, rustc-demangle, rust_v0/samples.rs) and their human
 *   names as rustc-demangle prints them (rust_v0/make_pairs.sh), plus
 *   rust_v0/crafted.tsv: names written by hand for what real code
 *   rarely mangles (constants of every kind, fn pointers, binders,
 *   Punycode), also printed by rustc-demangle;
 * - the budgets: the two names that stalled libiberty, exponential
 *   back-references, deep nesting, long output, each refused within its
 *   bound, and the work real names take against MP_V0_MAX_WORK;
 * - malformed names refused, suffixes dropped, snprintf truncation.
 *
 * MP_V0_PAIRS_DIR: the directory of the .tsv files (set by meson). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "rust_v0.h"
#include <mimprof/profiling.h>

#ifndef MP_V0_PAIRS_DIR
#error "MP_V0_PAIRS_DIR must name the directory of v0_pairs.tsv"
#endif

/* Checks every `name<TAB>human` line of `file` (an empty human: the name
 * is refused); returns the number of names demangled, and the most work
 * and the longest human name among them. */
static size_t check_pairs(const char *file, unsigned long *max_work, size_t *max_out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", MP_V0_PAIRS_DIR, file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    static char line[1 << 16];
    static char out[MP_DEMANGLE_MAX_OUTPUT + 1];
    size_t pairs = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        cr_assert_not_null(tab, "%s: no tab in '%s'", file, line);
        *tab = '\0';
        const char *name = line, *want = tab + 1;
        size_t len = 0;
        if (*want == '\0') { /* rustc-demangle refuses it or marks an error: refused */
            cr_expect_eq(mp_prof_demangle(name, out, sizeof out, &len), MP_PROF_E_NOT_MANGLED, "%s",
                         name);
            continue;
        }
        cr_expect_eq(mp_prof_demangle(name, out, sizeof out, &len), MP_PROF_OK, "%s", name);
        cr_expect_str_eq(out, want, "%s", name);
        cr_expect_eq(len, strlen(want), "%s", name);
        unsigned long work = 0;
        cr_expect_eq(mp_rust_v0_demangle(name, out, sizeof out, &work), (long)strlen(want));
        if (work > *max_work)
            *max_work = work;
        if (len > *max_out)
            *max_out = len;
        pairs++;
    }
    fclose(f);
    return pairs;
}

Test(demangle_v0, real_names_as_rustc_demangle_prints_them)
{
    unsigned long work = 0;
    size_t out = 0;
    size_t n = check_pairs("v0_pairs.tsv", &work, &out);
    cr_expect_geq(n, 1000, "only %zu pairs", n);
    /* real names stay far inside the work bound */
    cr_expect_lt(work * 8, MP_V0_MAX_WORK, "work %lu", work);
    cr_log_info("%zu real names, at most %lu work units, %zu bytes out", n, work, out);
}

Test(demangle_v0, crafted_names_as_rustc_demangle_prints_them)
{
    unsigned long work = 0;
    size_t out = 0;
    size_t n = check_pairs("crafted.tsv", &work, &out);
    cr_expect_geq(n, 20, "only %zu pairs", n);
}

Test(demangle_v0, the_std_frame_of_every_rust_program)
{
    char out[128];
    size_t len;
    cr_assert_eq(
        mp_prof_demangle("_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal", out, sizeof out, &len),
        MP_PROF_OK);
    cr_expect_str_eq(out, "std::rt::lang_start_internal");
    /* whatever the build has of libiberty */
    cr_expect_eq(
        mp_demangle("_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal.llvm.1234", out, sizeof out),
        (long)strlen("std::rt::lang_start_internal"));
    cr_expect_str_eq(out, "std::rt::lang_start_internal");
    cr_expect(mp_demangle_looks_mangled("_RNvCs1234_7mycrate3foo"));
}

/* The two names that stalled libiberty's v0 demangler (fuzz_demangle,
 * CI of 2026-12-01 and 12-02; both in fuzz/corpus/demangle): the first
 * prints exponentially much, the second re-walks back-references while
 * printing nothing. */
static const char exponential_rust_v0[] =
    "_RNvMsJ_NtNtNtC5alloc11co2lections5btree4nodeINtB5_6Hayyyyyyyyyyyyyyyyyy"
    "iyctyyyyyyyyyyyyiyctionyFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFGFFFFFyyyyyyyyyyxyndeReB1_";
static const char silent_rust_v0[] =
    "_RNvMsJ_NtNtNtNvMsJ_NtNtNtC5alloc11co2lections5btree4nodeINtB5_6HayyyFFFFFFFFFFFFFFFFFFF"
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFGFFFyyyyyxyndeReB1_C5alloc11co2l"
    "ections5btree4nodeINtB5_6HayFFyyyyyiyctyyydeReB1_";

Test(demangle_v0, libiberty_stalls_end_within_the_budget)
{
    const char *names[] = {exponential_rust_v0, silent_rust_v0};
    for (size_t i = 0; i < 2; i++) {
        char out[64];
        unsigned long work = 0;
        long n = mp_rust_v0_demangle(names[i], out, sizeof out, &work);
        /* refused (malformed or over a budget), after at most the work bound */
        cr_expect_eq(n, -1, "name %zu: %ld", i, n);
        cr_expect_leq(work, MP_V0_MAX_WORK + MP_DEMANGLE_MAX_INPUT, "name %zu: %lu", i, work);
        size_t len;
        cr_expect_eq(mp_prof_demangle(names[i], out, sizeof out, &len), MP_PROF_E_NOT_MANGLED);
    }
}

/* Base62 back-reference to offset `pos` (after "_R") into ref[16]. */
static void backref_to(char *ref, size_t pos)
{
    static const char d62[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char tmp[16];
    size_t j = 0, r = 0;
    ref[j++] = 'B';
    if (pos > 0) {
        size_t x = pos - 1;
        do {
            tmp[r++] = d62[x % 62];
            x /= 62;
        } while (x != 0);
        while (r > 0)
            ref[j++] = tmp[--r];
    }
    ref[j++] = '_';
    ref[j] = '\0';
}

/* `a::f::<T0, T1, ..., Tk>` where T0 = `leaf` and T(i+1) is the pair
 * (Ti, Ti) written as two back-references to Ti: level k prints 2^k
 * leaves from a few bytes. */
static void exponential_name(char *buf, size_t cap, int levels, const char *leaf)
{
    size_t at = (size_t)snprintf(buf, cap, "_RINvC1a1f%s", leaf);
    size_t prev = strlen("INvC1a1f"); /* offset of T0 after _R */
    for (int k = 0; k < levels; k++) {
        char ref[16];
        backref_to(ref, prev);
        prev = at - 2;
        at += (size_t)snprintf(buf + at, cap - at, "T%s%sE", ref, ref);
    }
    snprintf(buf + at, cap - at, "E");
}

/* The most work one refused call may take: the bound, passed by at most
 * one identifier's length. */
#define WORK_CEILING (MP_V0_MAX_WORK + MP_DEMANGLE_MAX_INPUT)

Test(demangle_v0, exponential_back_references_are_refused)
{
    static char name[4096], leaf[1024];
    char out[128];
    unsigned long work = 0;
    /* a few levels demangle (the construction is valid v0)... */
    exponential_name(name, sizeof name, 2, "u");
    cr_assert_gt(mp_rust_v0_demangle(name, out, sizeof out, &work), 0, "%s", name);
    cr_expect_str_eq(out, "a::f::<(), ((), ()), (((), ()), ((), ()))>", "%s", name);
    /* ...forty do not: 2^40 leaves, refused on the output bound */
    exponential_name(name, sizeof name, 40, "u");
    cr_expect_eq(mp_rust_v0_demangle(name, out, sizeof out, &work), -1);
    cr_expect_leq(work, WORK_CEILING);
    /* leaves that print nothing but take long to read (a path of 150
     * nested empty names): the work bound refuses it before the output
     * bound would */
    size_t at = 0;
    for (int k = 0; k < 150; k++)
        at += (size_t)snprintf(leaf + at, sizeof leaf - at, "Nv");
    at += (size_t)snprintf(leaf + at, sizeof leaf - at, "C0");
    for (int k = 0; k < 150; k++)
        at += (size_t)snprintf(leaf + at, sizeof leaf - at, "0");
    exponential_name(name, sizeof name, 2, leaf);
    cr_assert_gt(mp_rust_v0_demangle(name, out, sizeof out, &work), 0, "%s", name);
    cr_expect_str_eq(out, "a::f::<, (, ), ((, ), (, ))>");
    exponential_name(name, sizeof name, 40, leaf);
    cr_expect_eq(mp_rust_v0_demangle(name, out, sizeof out, &work), -1);
    cr_expect_leq(work, WORK_CEILING);
    cr_expect_geq(work, MP_V0_MAX_WORK, "refused before the work bound: %lu", work);
}

Test(demangle_v0, deep_nesting_is_refused)
{
    /* &&&...&u: one level of depth a reference */
    static char name[MP_DEMANGLE_MAX_INPUT + 1];
    char out[64];
    for (int levels = 10; levels <= MP_V0_MAX_DEPTH + 50; levels += MP_V0_MAX_DEPTH + 40 - 10) {
        size_t at = (size_t)snprintf(name, sizeof name, "_RINvC1a1f");
        for (int k = 0; k < levels; k++)
            name[at++] = 'R';
        memcpy(name + at, "uE", 3);
        long n = mp_rust_v0_demangle(name, out, sizeof out, NULL);
        if (levels < MP_V0_MAX_DEPTH - 5)
            cr_expect_eq(n, (long)strlen("a::f::<>") + levels + 2, "%d levels", levels);
        else
            cr_expect_eq(n, -1, "%d levels", levels);
    }
}

Test(demangle_v0, malformed_names_are_refused)
{
    static const char *const bad[] = {
        "_R",
        "_RC",                 /* no identifier */
        "_RC3ab",              /* identifier past the end */
        "_RNvC1a",             /* no name */
        "_RB_",                /* back-reference to itself */
        "_RNvB0_1a",           /* forward back-reference */
        "_RNvC1a1bX",          /* trailing garbage */
        "_RNvC1a1b$",          /* not a v0 character */
        "_RINvC1a1fu",         /* unterminated generic list */
        "_RINvC1a1fKb2_EE",    /* bool const 2 */
        "_RINvC1a1fKcd800_EE", /* surrogate char */
        "_RNvC1a1b\xc3\xa9",   /* non-ASCII in the mangled part */
        "_R0NvC1a1b",          /* version digits: not v0 */
        "_RNv_C1a1b",          /* namespace not a letter */
        "_RINvC1a1fRL0_hE",    /* lifetime 1 bound by nothing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[64] = "untouched";
        cr_expect_eq(mp_rust_v0_demangle(bad[i], out, sizeof out, NULL), -1, "'%s'", bad[i]);
        cr_expect_str_eq(out, "untouched", "'%s'", bad[i]);
    }
}

Test(demangle_v0, suffixes_are_dropped_and_output_truncates_like_snprintf)
{
    const char *name = "_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal.cold";
    const char *want = "std::rt::lang_start_internal";
    char out[8];
    size_t len;
    cr_assert_eq(mp_prof_demangle(name, out, sizeof out, &len), MP_PROF_OK);
    cr_expect_eq(len, strlen(want));
    cr_expect_eq(strncmp(out, want, sizeof out - 1), 0);
    cr_expect_eq(strlen(out), sizeof out - 1);
    cr_expect_eq(mp_prof_demangle(name, NULL, 0, &len), MP_PROF_OK, "length only");
    cr_expect_eq(len, strlen(want));
}
