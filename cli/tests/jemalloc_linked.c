/* SPDX-License-Identifier: MIT */
/* A program linked with jemalloc, as Debian's redis-server is: it asks
 * jemalloc's own statistics (mallctl, jemalloc_lib.c) about the heap its
 * malloc made, and says whether jemalloc sees it. Built twice
 * (tests/meson.build): with jemalloc_lib.c compiled in and libjemalloc
 * linked directly, and linked to jemalloc_lib.c as a library of ours that
 * links it (the program itself then names no libjemalloc), for `mimprof
 * run`'s choice of allocator (run_pick.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB (1u << 20)

size_t jelib_allocated(void); /* jemalloc_lib.c */

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
