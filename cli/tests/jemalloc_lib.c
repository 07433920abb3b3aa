/* SPDX-License-Identifier: MIT */
/* jemalloc's count of the bytes allocated, for jemalloc_linked.c: compiled
 * into it, or the library through which it links jemalloc. */
#include <jemalloc/jemalloc.h>
#include <stdint.h>

size_t jelib_allocated(void);

size_t jelib_allocated(void)
{
    uint64_t epoch = 1;
    size_t sz = sizeof epoch, allocated = 0;
    mallctl("epoch", &epoch, &sz, &epoch, sz);
    sz = sizeof allocated;
    mallctl("stats.allocated", &allocated, &sz, NULL, 0);
    return allocated;
}
