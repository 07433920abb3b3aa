/* SPDX-License-Identifier: MIT */
/* The jemalloc provider's fast entry points: jemalloc's own malloc and
 * free, found in the object that defines mallocx (never a malloc that
 * another object interposes), and the lookup that refuses a definition
 * coming from a dependency. */
#define _GNU_SOURCE /* dladdr */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <mimprof/sys.h>
#include <string.h>

static const void *fbase(const void *addr)
{
    Dl_info i;
    cr_assert_neq(dladdr(addr, &i), 0);
    return i.dli_fbase;
}

static const void *fn_addr(void (*f)(void))
{
    const void *a;
    memcpy(&a, &f, sizeof a);
    return a;
}

Test(jemalloc_fast, malloc_and_free_are_jemallocs_own)
{
    void *(*anchor)(size_t, int) = mallocx;
    void *(*m)(size_t) = mp_sys_jemalloc_fast_.malloc;
    void (*f)(void *) = mp_sys_jemalloc_fast_.free;
    cr_assert_neq(m, mp_sys_jemalloc_mallocx_, "the constructor did not resolve malloc");
    cr_assert_neq(f, mp_sys_jemalloc_dallocx_, "the constructor did not resolve free");
    const void *je = fbase(fn_addr((void (*)(void))anchor));
    cr_assert_eq(fbase(fn_addr((void (*)(void))m)), je);
    cr_assert_eq(fbase(fn_addr((void (*)(void))f)), je);
    /* Blocks of either entry point belong to one heap. */
    void *p = mp_sys_jemalloc_alloc(100, MP_SYS_NATURAL_ALIGN);
    cr_assert_geq(sallocx(p, 0), 100);
    mp_sys_jemalloc_dealloc(p, 0, 0);
    p = mp_sys_jemalloc_alloc(0, MP_SYS_NATURAL_ALIGN);
    cr_assert_not_null(p);
    mp_sys_jemalloc_dealloc(p, 0, 0);
    p = mp_sys_jemalloc_alloc(40, MP_SYS_NATURAL_ALIGN);
    mp_sys_jemalloc_dealloc(p, 40, MP_SYS_NATURAL_ALIGN); /* sized: sdallocx */
    mp_sys_jemalloc_dealloc(NULL, 0, 0);
}

Test(jemalloc_fast, a_definition_from_a_dependency_is_refused)
{
    /* libmimprof-sys defines no malloc; libc, a dependency, does. */
    const char *(*anchor)(void) = mp_sys_version;
    void *(*m)(size_t) = NULL;
    cr_assert_eq(mp_sys_resolve_in_object_(fn_addr((void (*)(void))anchor), "malloc", &m, sizeof m),
                 0);
    cr_assert_null(m);
    const char *(*v)(void) = NULL;
    cr_assert_eq(
        mp_sys_resolve_in_object_(fn_addr((void (*)(void))anchor), "mp_sys_version", &v, sizeof v),
        1);
    cr_assert_eq(v, mp_sys_version);
}
