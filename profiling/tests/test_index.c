/* SPDX-License-Identifier: MIT */
/* The tables' open-addressing index (src/index.h) alone: lookups in an
 * empty index, keys whose hashes collide (in the slot, in the whole
 * tag), growth at half full with every value kept, many keys, the value
 * limit, and allocation failure, both through the index's own memory
 * hook and (where the linker can wrap it) through calloc itself: a
 * failed growth leaves the index as it was and usable. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "index.h"

/* A caller's table: keys in an array, the index over it. */
typedef struct {
    uint64_t *keys;
    size_t n, cap;
    mp_index ix;
    unsigned compares; /* calls of the key compare */
} table;

/* Hash of key k: the default is the mixed key; a test may force one. */
static uint64_t (*hash_of)(uint64_t k);

static uint64_t mixed(uint64_t k) { return mp_hash_mix(k); }

static bool lookup(table *t, uint64_t k, mp_index_probe *p, uint32_t *i)
{
    *p = mp_index_start(&t->ix, hash_of(k));
    while (mp_index_next(p, i)) {
        t->compares++;
        if (t->keys[*i] == k)
            return true;
    }
    return false;
}

/* k's value (its position), added on first sight; -1 on out-of-memory. */
static int64_t intern(table *t, uint64_t k)
{
    if (!mp_index_reserve(&t->ix))
        return -1;
    mp_index_probe p;
    uint32_t i;
    if (lookup(t, k, &p, &i))
        return i;
    if (!mp_array_reserve((void **)&t->keys, &t->cap, t->n + 1, sizeof *t->keys))
        return -1;
    t->keys[t->n] = k;
    mp_index_put(&t->ix, &p, (uint32_t)t->n);
    return (int64_t)t->n++;
}

/* k's value, or -1 when absent. */
static int64_t find(table *t, uint64_t k)
{
    mp_index_probe p;
    uint32_t i;
    return lookup(t, k, &p, &i) ? (int64_t)i : -1;
}

static void table_free(table *t)
{
    free(t->keys);
    mp_index_free(&t->ix);
    *t = (table){0};
}

/* The index's invariants: a power-of-two capacity, at most half full,
 * and exactly n used slots. */
static void check_shape(const mp_index *ix)
{
    cr_assert(ix->cap == 0 || (ix->cap & (ix->cap - 1)) == 0, "cap %zu", ix->cap);
    cr_assert_leq(ix->n * 2, ix->cap);
    size_t used = 0;
    for (size_t i = 0; i < ix->cap; i++)
        used += ix->slots[i] != 0;
    cr_assert_eq(used, ix->n);
}

static void setup(void) { hash_of = mixed; }

TestSuite(index, .init = setup);

Test(index, empty_index_finds_nothing)
{
    table t = {0};
    cr_assert_eq(find(&t, 42), -1);
    cr_assert_eq(t.compares, 0);
    cr_assert_eq(t.ix.cap, 0);
    mp_index_free(&t.ix); /* an index that never grew frees */
    cr_assert_eq(intern(&t, 42), 0);
    cr_assert_eq(find(&t, 42), 0);
    cr_assert_eq(find(&t, 43), -1);
    check_shape(&t.ix);
    table_free(&t);
}

Test(index, equal_keys_one_value)
{
    table t = {0};
    for (int round = 0; round < 3; round++)
        for (uint64_t k = 0; k < 100; k++)
            cr_assert_eq(intern(&t, k * 7919), (int64_t)k);
    cr_assert_eq(t.n, 100);
    cr_assert_eq(t.ix.n, 100);
    table_free(&t);
}

static uint64_t same_hash(uint64_t k)
{
    (void)k;
    return 0x1234567800000000ull;
}

/* Every key has the same hash: each is a candidate for every lookup, the
 * caller's compare tells them apart. */
Test(index, whole_hash_collisions)
{
    hash_of = same_hash;
    table t = {0};
    for (uint64_t k = 0; k < 300; k++)
        cr_assert_eq(intern(&t, k + 1), (int64_t)k);
    for (uint64_t k = 0; k < 300; k++)
        cr_assert_eq(find(&t, k + 1), (int64_t)k);
    cr_assert_eq(find(&t, 1000), -1);
    check_shape(&t.ix);
    table_free(&t);
}

static uint64_t same_slot(uint64_t k)
{
    /* The same slot in any index up to 2^24 slots, a different tag. */
    return 0xabcdef0000000000ull | (k + 1) << 32;
}

/* Keys that probe from one slot but differ in their tag: the compare
 * runs for the key looked up only, never for its neighbours. */
Test(index, slot_collisions_skip_other_tags)
{
    hash_of = same_slot;
    table t = {0};
    for (uint64_t k = 0; k < 200; k++)
        cr_assert_eq(intern(&t, k), (int64_t)k);
    t.compares = 0;
    for (uint64_t k = 0; k < 200; k++)
        cr_assert_eq(find(&t, k), (int64_t)k);
    cr_assert_eq(t.compares, 200);
    t.compares = 0;
    cr_assert_eq(find(&t, 5000), -1);
    cr_assert_eq(t.compares, 0);
    table_free(&t);
}

/* Growth doubles at half full from 256 slots, and every value stays
 * where its key finds it. */
Test(index, grows_at_half_full)
{
    table t = {0};
    size_t grows = 0, last = 0;
    for (uint64_t k = 0; k < 5000; k++) {
        cr_assert_eq(intern(&t, k), (int64_t)k);
        if (t.ix.cap != last) {
            cr_assert_eq(t.ix.cap, last ? last * 2 : 256);
            cr_assert_eq(t.ix.n * 2, last ? last + 2 : 2, "grown only when full: n %zu", t.ix.n);
            last = t.ix.cap;
            grows++;
            for (uint64_t j = 0; j <= k; j++)
                cr_assert_eq(find(&t, j), (int64_t)j);
        }
    }
    cr_assert_eq(t.ix.cap, 16384);
    cr_assert_eq(grows, 7);
    check_shape(&t.ix);
    table_free(&t);
}

/* Room for several keys at once: one growth, to the capacity they need,
 * and then puts without a reserve of their own. */
Test(index, reserve_for_many)
{
    table t = {0};
    cr_assert(mp_index_reserve_n(&t.ix, 1000));
    cr_assert_eq(t.ix.cap, 2048);
    uint64_t *slots = t.ix.slots;
    for (uint64_t k = 0; k < 1000; k++) {
        mp_index_probe p;
        uint32_t i;
        cr_assert_not(lookup(&t, k, &p, &i));
        cr_assert(mp_array_reserve((void **)&t.keys, &t.cap, t.n + 1, sizeof *t.keys));
        t.keys[t.n] = k;
        mp_index_put(&t.ix, &p, (uint32_t)t.n++);
    }
    cr_assert_eq(t.ix.slots, slots, "no growth");
    cr_assert(mp_index_reserve_n(&t.ix, 24));
    cr_assert_eq(t.ix.slots, slots, "1024 of 2048 slots: still half full");
    cr_assert(mp_index_reserve_n(&t.ix, 25));
    cr_assert_eq(t.ix.cap, 4096);
    for (uint64_t k = 0; k < 1000; k++)
        cr_assert_eq(find(&t, k), (int64_t)k);
    check_shape(&t.ix);
    table_free(&t);
}

Test(index, many_keys)
{
    table t = {0};
    enum { N = 300000 };
    for (uint64_t k = 0; k < N; k++)
        cr_assert_eq(intern(&t, k * 0x9E3779B97F4A7C15ull), (int64_t)k);
    for (uint64_t k = 0; k < N; k++)
        cr_assert_eq(find(&t, k * 0x9E3779B97F4A7C15ull), (int64_t)k);
    for (uint64_t k = N; k < N + 1000; k++)
        cr_assert_eq(find(&t, k * 0x9E3779B97F4A7C15ull), -1);
    check_shape(&t.ix);
    table_free(&t);
}

/* Strings through mp_hash_str: keys that differ in their last byte only
 * spread over the slots (the finaliser reaches the high 32 bits). */
Test(index, string_hashes_spread)
{
    mp_index ix = {0};
    char key[16];
    for (int i = 0; i < 100; i++) {
        cr_assert(mp_index_reserve(&ix));
        snprintf(key, sizeof key, "name%c", 32 + i);
        mp_index_probe p = mp_index_start(&ix, mp_hash_str(key));
        uint32_t v;
        cr_assert_not(mp_index_next(&p, &v), "no two tags alike");
        mp_index_put(&ix, &p, (uint32_t)i);
    }
    /* 100 keys in 256 slots: few runs longer than a handful. */
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < ix.cap; i++) {
        run = ix.slots[i] ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    cr_assert_leq(longest, 12);
    mp_index_free(&ix);
}

/* The capacity stops at 2^32 slots: past 2^31 values growth refuses,
 * without touching the slots (none are allocated here). */
Test(index, value_limit)
{
    uint64_t one = 0;
    mp_index ix = {.slots = &one, .cap = (size_t)1 << 32, .n = MP_INDEX_MAX_VALUES};
    cr_assert_not(mp_index_reserve(&ix));
    cr_assert_eq(ix.slots, &one);
    cr_assert_eq(ix.cap, (size_t)1 << 32);
}

/* ---- allocation failure ---- */

static unsigned allocs, fail_at; /* the fail_at-th allocation fails (0: none) */
static size_t released;

static void *counting_zalloc(void *ctx, size_t bytes)
{
    cr_assert_eq(ctx, &allocs);
    if (++allocs == fail_at)
        return NULL;
    return calloc(1, bytes);
}

static void counting_release(void *ctx, void *p)
{
    cr_assert_eq(ctx, &allocs);
    released++;
    free(p);
}

static const mp_index_mem counting = {counting_zalloc, counting_release};

Test(index, failed_growth_leaves_the_index_usable)
{
    table t = {.ix = {.mem = &counting, .mem_ctx = &allocs}};
    allocs = 0;
    fail_at = 3; /* the growth from 512 to 1024 slots */
    released = 0;
    uint64_t k = 0;
    for (; intern(&t, k) == (int64_t)k; k++)
        cr_assert_lt(k, 10000);
    cr_assert_eq(k, 256, "the 257th key needs 1024 slots");
    cr_assert_eq(t.ix.cap, 512);
    cr_assert_eq(t.ix.n, 256);
    cr_assert_eq(released, 1, "the 256 slots went when 512 came");
    check_shape(&t.ix);
    for (uint64_t j = 0; j < k; j++)
        cr_assert_eq(find(&t, j), (int64_t)j);
    cr_assert_eq(find(&t, k), -1);
    /* memory again: the same key goes in */
    cr_assert_eq(intern(&t, k), (int64_t)k);
    cr_assert_eq(t.ix.cap, 1024);
    mp_index_free(&t.ix);
    cr_assert_eq(released, 3);
    cr_assert_eq(t.ix.mem, &counting, "free keeps the memory hook");
    cr_assert_eq(t.ix.cap, 0);
    table_free(&t);
}

static void *no_zalloc(void *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    return NULL;
}

static const mp_index_mem none = {no_zalloc, NULL};

Test(index, first_growth_failing)
{
    table t = {.ix = {.mem = &none}};
    cr_assert_eq(intern(&t, 1), -1);
    cr_assert_eq(t.ix.cap, 0);
    cr_assert_eq(t.ix.slots, NULL);
    cr_assert_eq(find(&t, 1), -1);
    mp_index_free(&t.ix); /* a release of NULL: nothing to do */
    table_free(&t);
}

Test(index, array_reserve)
{
    uint32_t *a = NULL;
    size_t cap = 0;
    cr_assert(mp_array_reserve((void **)&a, &cap, 1, sizeof *a));
    cr_assert_eq(cap, 64);
    cr_assert(mp_array_reserve((void **)&a, &cap, 64, sizeof *a));
    cr_assert_eq(cap, 64);
    a[63] = 7;
    cr_assert(mp_array_reserve((void **)&a, &cap, 1000, sizeof *a));
    cr_assert_eq(cap, 1024);
    cr_assert_eq(a[63], 7);
    uint32_t *before = a;
    cr_assert_not(mp_array_reserve((void **)&a, &cap, SIZE_MAX / 2, sizeof *a), "overflow");
    cr_assert_not(mp_array_reserve((void **)&a, &cap, SIZE_MAX, 1), "overflow");
    cr_assert_eq(a, before);
    cr_assert_eq(cap, 1024);
    free(a);
}

#if TEST_WRAP_CALLOC
/* The default memory: this program links index.c with calloc wrapped
 * (-Wl,--wrap=calloc), so its growth can be made to fail. */
void *__real_calloc(size_t n, size_t size);
static unsigned callocs, calloc_fail_at;

void *__wrap_calloc(size_t n, size_t size)
{
    if (++callocs == calloc_fail_at)
        return NULL;
    return __real_calloc(n, size);
}

Test(index, failed_calloc_leaves_the_index_usable)
{
    table t = {0};
    callocs = 0;
    calloc_fail_at = 2; /* the growth from 256 to 512 slots */
    uint64_t k = 0;
    for (; intern(&t, k) == (int64_t)k; k++)
        cr_assert_lt(k, 10000);
    cr_assert_eq(k, 128);
    cr_assert_eq(t.ix.cap, 256);
    check_shape(&t.ix);
    for (uint64_t j = 0; j < k; j++)
        cr_assert_eq(find(&t, j), (int64_t)j);
    cr_assert_eq(intern(&t, k), (int64_t)k);
    cr_assert_eq(t.ix.cap, 512);
    cr_assert_eq(callocs, 3);
    calloc_fail_at = 0;
    table_free(&t);
}
#endif
