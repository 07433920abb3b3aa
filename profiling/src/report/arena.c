/* SPDX-License-Identifier: MIT */
/* A bump arena (arena.h). */
#include "arena.h"

#include <stdlib.h>

struct mp_arena_chunk {
    struct mp_arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *mp_arena_alloc(mp_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    if (a->head == NULL || a->head->cap - a->head->used < n) {
        size_t cap = n > 60000 ? n : 60000;
        mp_arena_chunk *c = malloc(sizeof *c + cap);
        if (c == NULL)
            return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->bytes += sizeof *c + cap;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

void mp_arena_clear(mp_arena *a)
{
    mp_arena_chunk *c = a->head;
    while (c) {
        mp_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->bytes = 0;
}
