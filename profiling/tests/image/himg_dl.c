/* SPDX-License-Identifier: MIT */
/* A module for heap-image tests, built twice (with and without a GNU
 * build-id): it allocates through the caller's function, so that the
 * allocation's stack has a frame in this module. */
#include <stddef.h>

void *himg_dl_alloc(void *(*alloc)(size_t), size_t size);

__attribute__((noinline)) void *himg_dl_alloc(void *(*alloc)(size_t), size_t size)
{
    void *p = alloc(size);
    __asm__ volatile("" : : "g"(p) : "memory"); /* not a tail call */
    return p;
}
