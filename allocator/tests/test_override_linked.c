/* SPDX-License-Identifier: MIT */
/* A program linking the override gets the provider's malloc family. The
 * provider's usable_size agreeing with malloc_usable_size for blocks from
 * malloc, calloc, realloc and the aligned entry points proves they came
 * from the provider (glibc's chunk sizes differ from both allocators'). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <mimprof/sys.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b)  CAT2(a, b)
#define P(op)      CAT(MP_ALLOC_PROVIDER, op)

static void assert_provider_block(void *p, size_t size)
{
    cr_assert_not_null(p);
    cr_assert_eq(malloc_usable_size(p), P(usable_size)(p));
    cr_assert_geq(malloc_usable_size(p), size);
}

Test(override_linked, malloc_family_served_by_provider)
{
    /* 100000 is where glibc switches to mmap; both sides of it */
    size_t sizes[] = {1, 24, 1000, 100000, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = malloc(sizes[i]);
        assert_provider_block(p, sizes[i]);
        p = realloc(p, sizes[i] * 2);
        assert_provider_block(p, sizes[i] * 2);
        free(p);
        void *c = calloc(sizes[i], 1);
        assert_provider_block(c, sizes[i]);
        free(c);
    }
}

Test(override_linked, aligned_entry_points)
{
    void *p = NULL;
    cr_assert_eq(posix_memalign(&p, 4096, 10), 0);
    cr_assert_eq((uintptr_t)p % 4096, 0);
    assert_provider_block(p, 10);
    free(p);
    cr_assert_eq(posix_memalign(&p, 3, 10), EINVAL);
    cr_assert_eq(posix_memalign(&p, 4, 10), EINVAL); /* not a multiple of sizeof(void *) */

    p = aligned_alloc(65536, 100);
    cr_assert_eq((uintptr_t)p % 65536, 0);
    free(p);
    volatile size_t odd = 48; /* hidden from -Wnon-power-of-two-alignment */
    p = memalign(odd, 10);    /* rounded up to 64, as glibc does */
    cr_assert_eq((uintptr_t)p % 64, 0);
    free(p);
    long page = sysconf(_SC_PAGESIZE);
    p = valloc(10);
    cr_assert_eq((uintptr_t)p % (uintptr_t)page, 0);
    free(p);
    p = pvalloc(1);
    cr_assert_eq((uintptr_t)p % (uintptr_t)page, 0);
    cr_assert_geq(malloc_usable_size(p), (size_t)page);
    free(p);
}

Test(override_linked, glibc_edge_semantics)
{
    volatile size_t huge = SIZE_MAX / 2; /* hidden from -Walloc-size-larger-than */
    errno = 0;
    cr_assert_null(calloc(huge, 4));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(reallocarray(NULL, huge, 4));
    cr_assert_eq(errno, ENOMEM);
    void *p = malloc(0);
    cr_assert_not_null(p);
    free(p);
    p = malloc(10);
    cr_assert_null(realloc(p, 0)); /* glibc: frees, returns NULL */
    cr_assert_eq(malloc_usable_size(NULL), 0);
    free(NULL);
}
