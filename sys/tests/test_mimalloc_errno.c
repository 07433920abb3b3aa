/* SPDX-License-Identifier: MIT */
/* mp_sys_mimalloc_errno_by_handler: with mimalloc's error callback
 * registered, the provider built with MP_SYS_MIMALLOC_ERRNO_BY_HANDLER
 * (whose unaligned operations return mimalloc's result as it is) still
 * gives the contract's errno on failure, and leaves errno alone on
 * success. Without the registration mimalloc 2.0 gives no ENOMEM (errno
 * stays as it was, or is what a system call on its error path left: the
 * first test shows it, so that the second proves the callback). */
#define MP_SYS_MIMALLOC_ERRNO_BY_HANDLER
#include <criterion/criterion.h>
#include <errno.h>
#include <mimprof/sys.h>
#include <stdint.h>

static volatile size_t max_size = SIZE_MAX; /* hidden from -Walloc-size-larger-than */

Test(mimalloc_errno, without_the_callback_mimalloc_sets_none)
{
    errno = 0;
    cr_assert_null(mi_malloc(max_size));
    cr_assert_neq(errno, ENOMEM, "mimalloc sets ENOMEM itself: the callback may be unneeded");
}

Test(mimalloc_errno, the_callback_gives_enomem)
{
    mp_sys_mimalloc_errno_by_handler();
    errno = 0;
    cr_assert_null(mp_sys_mimalloc_alloc(max_size, MP_SYS_NATURAL_ALIGN));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(mp_sys_mimalloc_alloc_zeroed(max_size, MP_SYS_NATURAL_ALIGN));
    cr_assert_eq(errno, ENOMEM);
    void *p = mp_sys_mimalloc_alloc(64, MP_SYS_NATURAL_ALIGN);
    cr_assert_not_null(p);
    errno = 0;
    cr_assert_null(mp_sys_mimalloc_realloc(p, 64, MP_SYS_NATURAL_ALIGN, max_size));
    cr_assert_eq(errno, ENOMEM);
    errno = 42;
    void *q = mp_sys_mimalloc_realloc(p, 64, MP_SYS_NATURAL_ALIGN, 128); /* p intact above */
    cr_assert_not_null(q);
    cr_assert_eq(errno, 42, "a success changed errno");
    mp_sys_mimalloc_dealloc(q, 0, 0);
}
