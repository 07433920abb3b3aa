/* SPDX-License-Identifier: MIT */
/* The stack depot: every distinct captured stack is stored once, so that
 * records and live entries carry one pointer, and a report can aggregate
 * by pointer identity.
 *
 * Striped chained hash table; a stack, once interned, is immutable and
 * lives until the session ends (mp_depot_clear, under rw exclusive), so
 * holders of a pointer need no reference count.
 *
 * Every walk of a chain is bounded by the stripe's count, and clearing
 * cuts a chain where it meets a stack it has already visited: the chains
 * can never make the profiler loop forever, even if the allocator handed
 * out one block twice. That happens when a program allocates in a signal
 * handler that interrupted the allocator itself (undefined behaviour that
 * glibc usually survives; mimalloc's free lists then serve a block that
 * is still in use, and the depot linked it into its chain a second time:
 * mp_depot_clear at exit went round that cycle forever). The allocator's
 * own state is beyond repair then; the profiler's
 * part is only never to hang on it. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define STRIPES 64u

typedef struct stripe {
    mp_lock lock;
    mp_stack **buckets;
    size_t nbuckets; /* power of two, or 0 */
    size_t count;
} stripe;

static stripe g_stripes[STRIPES];
static _Atomic uint64_t g_count;
static _Atomic uint64_t g_bytes; /* of the stacks held (the profiler's own memory, reconcile.c) */

void mp_depot_init(void)
{
    for (unsigned i = 0; i < STRIPES; i++)
        mp_lock_init(&g_stripes[i].lock);
}

/* One multiply per frame (h = (h ^ pc) * C: each step a bijection of h,
 * so stacks that differ in one frame never collide), four frames a loop
 * turn, then a final mix for the low bits the stripe and the bucket take
 * (a product's low bits see only its inputs' low bits). */
static uint64_t hash_stack(const uintptr_t *pcs, uint32_t depth, bool truncated)
{
    const uint64_t c = 0x9E3779B97F4A7C15ULL;
    uint64_t h = 0x84222325cbf29ce4ULL ^ depth ^ ((uint64_t)truncated << 32);
    uint32_t i = 0;
    for (; i + 4 <= depth; i += 4) {
        h = (h ^ (uint64_t)pcs[i]) * c;
        h = (h ^ (uint64_t)pcs[i + 1]) * c;
        h = (h ^ (uint64_t)pcs[i + 2]) * c;
        h = (h ^ (uint64_t)pcs[i + 3]) * c;
    }
    for (; i < depth; i++)
        h = (h ^ (uint64_t)pcs[i]) * c;
    return h ^ (h >> 29) ^ (h >> 47);
}

/* Marks a stack as visited by mp_depot_clear (its hash is not needed any
 * more once the stripe is being emptied). */
#define VISITED 0x5649534954454421ULL

static bool grow(stripe *s)
{
    size_t n = s->nbuckets ? s->nbuckets * 2 : 64;
    mp_stack **b = calloc(n, sizeof *b);
    if (b == NULL)
        return false;
    size_t budget = s->count; /* every walk is bounded: see the header */
    for (size_t i = 0; i < s->nbuckets; i++) {
        mp_stack *e = s->buckets[i];
        while (e != NULL && budget-- > 0) {
            mp_stack *next = e->next;
            size_t k = (size_t)(e->hash >> 6) & (n - 1);
            e->next = b[k];
            b[k] = e;
            e = next;
        }
    }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = n;
    return true;
}

const mp_stack *mp_depot_intern(const uintptr_t *pcs, uint32_t depth, bool truncated)
{
    uint64_t h = hash_stack(pcs, depth, truncated);
    stripe *s = &g_stripes[h & (STRIPES - 1)];
    mp_stack *found = NULL;
    mp_lock_take(&s->lock);
    if (s->nbuckets != 0) {
        size_t budget = s->count;
        for (mp_stack *e = s->buckets[(h >> 6) & (s->nbuckets - 1)]; e != NULL && budget-- > 0;
             e = e->next) {
            if (e->hash == h && e->depth == depth && e->truncated == (uint32_t)truncated &&
                memcmp(e->pcs, pcs, depth * sizeof *pcs) == 0) {
                found = e;
                break;
            }
        }
    }
    if (found == NULL && (s->count >= s->nbuckets * 2 ? grow(s) : true)) {
        found = malloc(sizeof *found + depth * sizeof *pcs);
        if (found != NULL) {
            found->hash = h;
            found->depth = depth;
            found->truncated = truncated;
            memcpy(found->pcs, pcs, depth * sizeof *pcs);
            size_t k = (size_t)(h >> 6) & (s->nbuckets - 1);
            found->next = s->buckets[k];
            s->buckets[k] = found;
            s->count++;
            atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&g_bytes, sizeof *found + depth * sizeof *pcs,
                                      memory_order_relaxed);
        }
    }
    mp_lock_release(&s->lock);
    return found;
}

/* Frees one chain: first walks it (at most `budget` stacks) marking each,
 * and cuts it where it reaches a stack already marked, so that the walk
 * that frees it visits every stack once. */
static void free_chain(mp_stack *head, size_t budget)
{
    mp_stack **link = &head;
    while (*link != NULL && budget > 0 && (*link)->hash != VISITED) {
        (*link)->hash = VISITED;
        link = &(*link)->next;
        budget--;
    }
    *link = NULL;
    while (head != NULL) {
        mp_stack *next = head->next;
        free(head);
        head = next;
    }
}

void mp_depot_clear(void)
{
    for (unsigned i = 0; i < STRIPES; i++) {
        stripe *s = &g_stripes[i];
        mp_lock_take(&s->lock);
        for (size_t k = 0; k < s->nbuckets; k++)
            free_chain(s->buckets[k], s->count);
        free(s->buckets);
        s->buckets = NULL;
        s->nbuckets = 0;
        s->count = 0;
        mp_lock_release(&s->lock);
    }
    atomic_store_explicit(&g_count, 0, memory_order_relaxed);
    atomic_store_explicit(&g_bytes, 0, memory_order_relaxed);
}

uint64_t mp_depot_count(void) { return atomic_load_explicit(&g_count, memory_order_relaxed); }
uint64_t mp_depot_bytes(void) { return atomic_load_explicit(&g_bytes, memory_order_relaxed); }
