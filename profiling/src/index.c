/* SPDX-License-Identifier: MIT */
/* The open-addressing index (index.h): its growth, the only part that
 * allocates, and the growth of the caller's record arrays. */
#include "index.h"

#include <stdlib.h>

/* (n + more) * 2 and the capacity (up to 2^32 slots) fit a size_t. */
_Static_assert(sizeof(size_t) >= sizeof(uint64_t), "the index wants 64-bit sizes");

const uint64_t mp_index_no_slot = 0;

static void release(mp_index *ix)
{
    if (ix->mem == NULL)
        free(ix->slots);
    else if (ix->mem->release != NULL && ix->slots != NULL)
        ix->mem->release(ix->mem_ctx, ix->slots);
}

bool mp_index_grow(mp_index *ix, size_t more)
{
    if (more > MP_INDEX_MAX_VALUES || ix->n > MP_INDEX_MAX_VALUES - more)
        return false;
    size_t nc = ix->cap ? ix->cap * 2 : 256;
    unsigned shift = ix->cap ? ix->shift - 1 : 56;
    while ((ix->n + more) * 2 > nc) {
        nc *= 2;
        shift--;
    }
    if (nc > SIZE_MAX / sizeof *ix->slots)
        return false;
    uint64_t *t = ix->mem ? ix->mem->zalloc(ix->mem_ctx, nc * sizeof *t) : calloc(nc, sizeof *t);
    if (t == NULL)
        return false;
    /* A slot's tag is the hash's top 32 bits, which also place it (shift
     * >= 32): the old slots move without their records. */
    for (size_t i = 0; i < ix->cap; i++) {
        uint64_t e = ix->slots[i];
        if (e == 0)
            continue;
        size_t j = (size_t)(e >> shift);
        while (t[j] != 0)
            j = (j + 1) & (nc - 1);
        t[j] = e;
    }
    release(ix);
    ix->slots = t;
    ix->cap = nc;
    ix->shift = shift;
    return true;
}

void mp_index_free(mp_index *ix)
{
    release(ix);
    *ix = (mp_index){.mem = ix->mem, .mem_ctx = ix->mem_ctx};
}

bool mp_array_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return false;
        nc *= 2;
    }
    if (elem != 0 && nc > SIZE_MAX / elem)
        return false;
    void *q = realloc(*p, nc * elem);
    if (q == NULL)
        return false;
    *p = q;
    *cap = nc;
    return true;
}
