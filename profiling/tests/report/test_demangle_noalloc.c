/* SPDX-License-Identifier: MIT */
/* The demangler allocates nothing (demangle.h): this program's malloc
 * family counts the calls made while mp_demangle runs on real names, so
 * that a report's names can never reach a hooked allocator's lock or the
 * profiler from the demangler. Not built under sanitizers (they own
 * malloc). */
#include <criterion/criterion.h>
#include <string.h>

#include "demangle.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static __thread int counting;
static __thread unsigned long calls;

void *malloc(size_t n)
{
    calls += counting;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    calls += counting;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    calls += counting;
    return __libc_realloc(p, n);
}
void free(void *p)
{
    calls += counting && p != NULL;
    __libc_free(p);
}

Test(demangle_noalloc, no_malloc_family_call)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    static const char *const names[] = {
        "_ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
        "_ZZN4shop4fillEmENKUlmE_clEm",
        "_ZNSt8_Rb_treeINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESt4pairIKS5_St10unique_"
        "ptrIN4shop4ItemESt14default_deleteISA_EEESt10_Select1stISE_ESt4lessIS5_ESaISE_EE22_M_"
        "emplace_hint_uniqueIJRKSt21piecewise_construct_tSt5tupleIJRS7_EESP_IJEEEEESt17_Rb_tree_"
        "iteratorISE_ESt23_Rb_tree_const_iteratorISE_EDpOT_",
        "_ZN3std2rt10lang_start17h0123456789abcdefE",
        "_RNvCs1234_7mycrate3foo",
        /* Rust v0 (rust_v0.c): Punycode, generics, impls, constants */
        "_RNvNtCs95VJtrAqbEC_7samplesu9gre_6ka8iu7lzzl24a",
        "_RNvXs0_Cs95VJtrAqbEC_7samplesINtB5_7WrapperfKj3_ENtB5_5Shape4areaB5_",
        "_Zfoo",
    };
    char out[8192];
    long total = 0;
    /* the counter sees calls (strdup: from inside libc) */
    counting = 1;
    free(strdup("x"));
    counting = 0;
    cr_assert_eq(calls, 2);
    calls = 0;
    counting = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        total += mp_demangle(names[i], out, sizeof out);
    counting = 0;
    cr_expect_gt(total, 0);
    cr_expect_eq(calls, 0, "%lu allocator calls while demangling", calls);
}
