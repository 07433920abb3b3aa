/* SPDX-License-Identifier: MIT */
/* mp_prof_demangle / mp_demangle (src/report/demangle.c): the naming rule
 * on real linkage names (C++, Rust legacy), names left alone (C,
 * refused, too long), snprintf-style truncation, argument checks. Rust v0
 * names: test_demangle_v0.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "demangle.h"
#include <mimprof/profiling.h>

static const char *const pairs[][2] = {
    {"_ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     "shop::Cache<shop::Item>::put"},
    {"_Znwm", "operator new"},
    {"_Znam", "operator new[]"},
    {"_ZnwmSt11align_val_t", "operator new"},
    {"_ZdlPvm", "operator delete"},
    {"_ZNSt6vectorIiSaIiEE17_M_default_appendEm",
     "std::vector<int, std::allocator<int> >::_M_default_append"},
    {"_ZZN4shop4fillEmENKUlmE_clEm",
     "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()"},
    {"_ZN12_GLOBAL__N_14workEv", "(anonymous namespace)::work"},
    {"_ZNK4shop7Derived4sizeEv", "shop::Derived::size"},
    {"_ZN4shop4makeINS_4ItemEEET_v", "shop::make<shop::Item>"},
    {"_ZN4shop4BaseD2Ev", "shop::Base::~Base"},
    /* compiler clones keep the function's name */
    {"_ZN4shop4fillEm.cold", "shop::fill"},
    {"_Z3fooi.constprop.0", "foo"},
    /* Rust legacy (hash dropped) */
    {"_ZN3std2rt10lang_start17h0123456789abcdefE", "std::rt::lang_start"},
};

Test(demangle, real_names_by_the_rule)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char out[512];
        size_t len = 0;
        cr_expect_eq(mp_prof_demangle(pairs[i][0], out, sizeof out, &len), MP_PROF_OK, "%s",
                     pairs[i][0]);
        cr_expect_str_eq(out, pairs[i][1]);
        cr_expect_eq(len, strlen(pairs[i][1]));
    }
}

Test(demangle, other_names_stay_as_they_are)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    static const char *const keep[] = {
        "main",
        "malloc",
        "report_site_alpha",
        "_start",
        "__libc_start_main",
        "shop::Cache<shop::Item>::put", /* already human */
        "_Z",
        "_Zfoo",
        "_ZN4shop",
        "_R", /* prefixes of nothing valid: refused */
        "",
        "Z3fooi",
        "_zN3fooE",
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char out[64] = "untouched";
        size_t len = 12345;
        cr_expect_eq(mp_prof_demangle(keep[i], out, sizeof out, &len), MP_PROF_E_NOT_MANGLED,
                     "'%s'", keep[i]);
        cr_expect_str_eq(out, "untouched");
        cr_expect_eq(len, 12345);
    }
}

Test(demangle, longer_than_the_bound_is_left_alone)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    /* _ZN + 4 digits + an identifier + 3fooEv: a valid name of exactly
     * MP_DEMANGLE_MAX_INPUT bytes, then one a byte longer. */
    static char name[MP_DEMANGLE_MAX_INPUT + 16];
    size_t id = MP_DEMANGLE_MAX_INPUT - 13; /* 4 digits */
    snprintf(name, sizeof name, "_ZN%zu", id);
    size_t at = strlen(name);
    memset(name + at, 'a', id);
    strcpy(name + at + id, "3fooEv");
    char out[4096];
    size_t len;
    cr_assert_eq(strlen(name), MP_DEMANGLE_MAX_INPUT);
    cr_expect_eq(mp_prof_demangle(name, out, sizeof out, &len), MP_PROF_OK, "at the bound");
    cr_expect_eq(len, id + strlen("::foo"));
    /* one more byte of identifier: over the bound */
    snprintf(name, sizeof name, "_ZN%zu", id + 1);
    at = strlen(name);
    memset(name + at, 'a', id + 1);
    strcpy(name + at + id + 1, "3fooEv");
    cr_assert_gt(strlen(name), MP_DEMANGLE_MAX_INPUT);
    cr_expect_eq(mp_prof_demangle(name, out, sizeof out, &len), MP_PROF_E_NOT_MANGLED);
}

Test(demangle, truncates_like_snprintf)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    const char *want = "std::vector<int, std::allocator<int> >::_M_default_append";
    char out[16];
    size_t len;
    cr_assert_eq(
        mp_prof_demangle("_ZNSt6vectorIiSaIiEE17_M_default_appendEm", out, sizeof out, &len),
        MP_PROF_OK);
    cr_expect_eq(len, strlen(want));
    cr_expect_eq(strlen(out), sizeof out - 1);
    cr_expect_eq(strncmp(out, want, sizeof out - 1), 0);
    cr_expect_eq(mp_prof_demangle("_Znwm", NULL, 0, &len), MP_PROF_OK, "length only");
    cr_expect_eq(len, strlen("operator new"));
}

Test(demangle, bad_arguments)
{
    char out[8];
    size_t len;
    cr_expect_eq(mp_prof_demangle(NULL, out, sizeof out, &len), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_demangle("_Znwm", out, sizeof out, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_demangle("_Znwm", NULL, 8, &len), MP_PROF_E_INVALID_CONFIG);
}

Test(demangle, unsupported_without_the_feature)
{
    if (mp_demangle_available())
        cr_skip_test("built with the demangle feature");
    char out[64];
    size_t len;
    cr_expect_eq(mp_prof_demangle("_Znwm", out, sizeof out, &len), MP_PROF_E_UNSUPPORTED);
    cr_expect_eq(mp_demangle("_Znwm", out, sizeof out), -1);
}

/* Regression (fuzz_demangle, CI of 2026-12-01): back-references make this
 * 201-byte Rust v0 name print exponentially much; libiberty walked it for
 * minutes. It is refused (now by rust_v0.c; meson's test timeout is what
 * catches a walk that is not cut short). */
static const char exponential_rust_v0[] =
    "_RNvMsJ_NtNtNtC5alloc11co2lections5btree4nodeINtB5_6Hayyyyyyyyyyyyyyyyyy"
    "iyctyyyyyyyyyyyyiyctionyFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"
    "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFGFFFFFyyyyyyyyyyxyndeReB1_";

Test(demangle, exponential_output_is_refused)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    char out[64];
    size_t len = 0;
    cr_expect_eq(mp_demangle(exponential_rust_v0, out, sizeof out), -1); /* rust_v0.c */
    cr_expect_eq(mp_prof_demangle(exponential_rust_v0, out, sizeof out, &len),
                 MP_PROF_E_NOT_MANGLED);
    /* the walk cut short leaves the demangler usable */
    cr_expect_eq(mp_demangle("_Znwm", out, sizeof out), 12);
    cr_expect_str_eq(out, "operator new");
}
