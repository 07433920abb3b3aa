/* SPDX-License-Identifier: MIT */
/* Memory helpers: growable arrays, and large blocks.
 *
 * On a fresh process most of a load's cost is first-touch page faults, so a
 * large block is mapped and populated in one call (one batch of faults, not
 * one per page), and a block of several MiB is aligned to 2 MiB and offered
 * to transparent huge pages (it is about to be filled end to end: a region,
 * not a sparse heap). Small blocks come from malloc. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>

#ifndef MAP_POPULATE /* Linux only (not macOS): pages fault in on first touch */
#define MAP_POPULATE 0
#endif

#define MAP_THRESHOLD  ((size_t)1 << 20)
#define HUGE_THRESHOLD ((size_t)4 << 20)
#define HUGE_PAGE      ((size_t)2 << 20)
#define PAGE           ((size_t)4096)

static size_t round_up(size_t n, size_t to) { return (n + to - 1) & ~(to - 1); }

/* A 2 MiB-aligned mapping of `size` bytes advised for huge pages and
 * populated; NULL if any step is unavailable. */
static void *huge_alloc(size_t size, int populate)
{
#ifdef MADV_HUGEPAGE
    size_t len = round_up(size, PAGE);
    unsigned char *p =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    unsigned char *al = (unsigned char *)round_up((size_t)p, HUGE_PAGE);
    if (al > p)
        munmap(p, (size_t)(al - p));
    munmap(al + len, (size_t)(p + len + HUGE_PAGE - (al + len)));
    madvise(al, len, MADV_HUGEPAGE);
    /* Populate: one write per page (a huge page takes its first one). */
    for (size_t off = 0; populate && off < len; off += PAGE)
        ((volatile unsigned char *)al)[off] = 0;
    return al;
#else
    (void)size;
    (void)populate;
    return NULL;
#endif
}

static void *big_alloc(size_t size, int *mapped, int populate)
{
    *mapped = 0;
    if (size >= HUGE_THRESHOLD) {
        void *p = huge_alloc(size, populate);
        if (p) {
            *mapped = 1;
            return p;
        }
    }
    if (size >= MAP_THRESHOLD) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p != MAP_FAILED) {
            *mapped = 1;
            return p;
        }
    }
    return malloc(size ? size : 1);
}

void *img_big_alloc(size_t size, int *mapped) { return big_alloc(size, mapped, 1); }

void *img_big_alloc_lazy(size_t size, int *mapped) { return big_alloc(size, mapped, 0); }

void *img_big_zalloc(size_t size, int *mapped)
{
    if (size >= MAP_THRESHOLD)
        return img_big_alloc(size, mapped); /* fresh mappings are zero */
    *mapped = 0;
    return calloc(1, size ? size : 1);
}

size_t img_big_size(size_t size)
{
#ifdef MADV_HUGEPAGE
    if (size >= HUGE_THRESHOLD)
        return round_up(size, HUGE_PAGE);
#endif
    return size;
}

void img_big_free(void *p, size_t size, int mapped)
{
    if (mapped)
        munmap(p, round_up(size, PAGE));
    else
        free(p);
}

int img_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}
