/* SPDX-License-Identifier: MIT */
/* A program linked with jemalloc, as Debian's redis-server is: it asks
 * jemalloc's own statistics (mallctl) about the heap its malloc made, and
 * says whether jemalloc sees it. Built twice (tests/meson.build): linked
 * to libjemalloc directly, and with -DVIA_LIB through a library of ours
 * that links it (the program itself then names no libjemalloc), for
 * `mimprof run`'s choice of allocator (run_pick.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB (1u << 20)

#ifdef VIA_LIB
size_t jelib_allocated(void); /* jemalloc_lib.c */
#else
#include <jemalloc/jemalloc.h>
static size_t jelib_allocated(void)
{
    uint64_t epoch = 1;
    size_t sz = sizeof epoch, allocated = 0;
    mallctl("epoch", &epoch, &sz, &epoch, sz);
    sz = sizeof allocated;
    mallctl("stats.allocated", &allocated, &sz, NULL, 0);
    return allocated;
}
#endif

int main(void)
{
    char *p = malloc(8 * MB);
    if (p == NULL)
        return 1;
    memset(p, 1, 8 * MB);
    printf("jemalloc sees %s\n", jelib_allocated() >= 8 * MB ? "the heap" : "no heap");
    free(p);
    return 0;
}
