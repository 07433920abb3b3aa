/* SPDX-License-Identifier: MIT */
/* The library's four operations, its identity, and its failure contract. */
#include <criterion/criterion.h>
#include <errno.h>
#include <mimprof/allocator.h>
#include <stdint.h>
#include <string.h>

Test(allocator, identity)
{
    cr_assert_str_eq(mp_alloc_provider_name(), PROVIDER_NAME);
    cr_assert_str_not_empty(mp_alloc_version());
}

Test(allocator, four_operations)
{
    unsigned char *p = mp_alloc_alloc(1000, 256);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 256, 0);
    memset(p, 7, 1000);
    p = mp_alloc_realloc(p, 1000, 256, 5000);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 256, 0);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(p[i], 7);
    cr_assert_geq(mp_alloc_usable_size(p), 5000);
    mp_alloc_dealloc(p, 5000, 256);

    unsigned char *z = mp_alloc_alloc_zeroed(4096, 8);
    cr_assert_not_null(z);
    for (int i = 0; i < 4096; i++)
        cr_assert_eq(z[i], 0);
    mp_alloc_dealloc(z, 0, 8); /* size unknown */
}

Test(allocator, realloc_failure_keeps_block)
{
    char *p = mp_alloc_alloc(64, 8);
    strcpy(p, "still here");
    errno = 0;
    cr_assert_null(mp_alloc_realloc(p, 64, 8, SIZE_MAX / 2 - 4096));
    cr_assert_eq(errno, ENOMEM);
    cr_assert_str_eq(p, "still here");
    mp_alloc_dealloc(p, 64, 8);
}
