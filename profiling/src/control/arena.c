/* SPDX-License-Identifier: MIT */
/* Bump allocation on mmap()ed chunks (arena.h). */
#include "arena.h"

#include <stdint.h>
#include <sys/mman.h>

struct mpc_arena_chunk {
    mpc_arena_chunk *next;
    size_t size; /* of the mapping, this header included */
    size_t off;  /* next free byte */
};

enum { CHUNK = 1 << 20 };

void *mpc_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void mpc_unmap(void *p, size_t n)
{
    if (p != NULL)
        munmap(p, n);
}

void *mpc_arena_alloc(mpc_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    mpc_arena_chunk *c = a->head;
    if (c == NULL || c->size - c->off < n) {
        size_t hdr = (sizeof *c + 15) & ~(size_t)15;
        size_t size = n + hdr > CHUNK ? n + hdr : CHUNK;
        c = mpc_map(size);
        if (c == NULL)
            return NULL;
        c->next = a->head;
        c->size = size;
        c->off = hdr;
        a->head = c;
    }
    void *p = (char *)c + c->off;
    c->off += n;
    return p;
}

void mpc_arena_free(mpc_arena *a)
{
    for (mpc_arena_chunk *c = a->head, *next; c != NULL; c = next) {
        next = c->next;
        mpc_unmap(c, c->size);
    }
    a->head = NULL;
}
