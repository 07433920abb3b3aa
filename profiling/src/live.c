/* SPDX-License-Identifier: MIT */
/* The live table: sampled pointer -> (stack, size, weight, generation, id,
 * allocation time),
 * and the free-path filter that keeps unsampled frees away from it.
 * Every insertion and removal is also an event of the live estimate and
 * the window's peak (peak.c), told under the stripe lock.
 *
 * Layout. mp_prof_hook_filter_slot(p) (<mimprof/sampling.h>) is the
 * filter slot of p. The top 6 bits of the slot choose one of 64 stripes,
 * so every pointer of a filter slot, and every filter word, belongs to
 * exactly one stripe. A stripe has a mutex, an open-addressed table (linear
 * probing, backward-shift deletion, no tombstones) and a count per filter
 * slot.
 *
 * Filter invariant (under the stripe lock): the bit of a slot is set iff
 * its count is nonzero, and a page's summary byte counts the entries on
 * that page (mod 2^20; the byte's stripe is the page's); counts saturate
 * at 255 and then stay (the bit or byte then stays set: a false positive,
 * never a false negative). The bit is set
 * before the allocation returns the pointer to the application, and
 * cleared only after the entry is gone, so a free of a sampled pointer
 * always sees the bit (the application's own hand-over of the pointer
 * orders our store before its load). Readers use relaxed atomic loads. */
#include <stdlib.h>
#include <string.h>

#include <mimprof/sampling.h>

#include "internal.h"
#include "lock.h"
#include "peak.h"

#define STRIPE_BITS      6u
#define STRIPES          (1u << STRIPE_BITS)
#define SLOT_BITS        (MP_PROF_HOOK_FILTER_BITS - STRIPE_BITS)
#define SLOTS_PER_STRIPE (1u << SLOT_BITS)

mp_prof_hook_filter_t mp_prof_hook_filter;

/* One cache line an entry (the table is allocated on a line's boundary),
 * so that an insertion or a removal that finds its slot at the first
 * probe touches one line of the table; a slot's address is a shift. */
typedef struct __attribute__((aligned(64))) entry {
    /* ptr (0 = empty), stack, size, weight and seq: the event of its
     * insertion (peak.c), which is also its identity (mp_live_id): event
     * numbers are unique within a session, and a session's end clears the
     * table (a fork child's keeps it, and keeps counting events from the
     * parent's number: session.c), so no two entries a caller of
     * mp_live_id can meet share one. The peak's removal reads them
     * through this part (peak.h). */
    mp_peak_ev ev;
    uint64_t gen;
    uint64_t born; /* mp_now_nanos() when sampled (the ages of a report, age.c) */
} entry;

/* 128 bytes (aligned to a cache line): no two stripes share a line, and a
 * stripe's address is one shift of its index. */
typedef struct __attribute__((aligned(64))) stripe {
    mp_lock lock;
    entry *slots;
    size_t cap;     /* power of two, or 0 */
    unsigned shift; /* home()'s for cap */
    size_t count;
    size_t grow_at;  /* count at which an insertion grows the table: 3/4 of cap */
    uint8_t *counts; /* SLOTS_PER_STRIPE filter-slot counts, with the first table */
    /* Heap-image snapshot: while set, the stripe has not been copied yet
     * (see mp_live_snap_begin). Under the stripe lock. */
    bool snap_pending;
    size_t snap_off;  /* this stripe's first slot in g_snap.v */
    size_t snap_room; /* slots reserved for it (its count at the instant) */
    size_t snap_n;    /* slots it filled */
} stripe;

_Static_assert(STRIPES == MP_LIVE_STRIPES, "peak.h's stripe count");
_Static_assert(sizeof(entry) == 64, "an entry a cache line");

static stripe g_stripes[STRIPES];
static _Atomic uint64_t g_count;
static _Atomic uint64_t g_limit = (uint64_t)1 << 20;

/* The one snapshot in progress (callers hold g_rec.session throughout). */
static struct {
    mp_live_sample *v;
    uint64_t gen;
    _Atomic uint64_t max_copy_ns; /* longest stripe copy of this snapshot */
} g_snap;

void mp_live_init(void)
{
    for (unsigned i = 0; i < STRIPES; i++)
        mp_lock_init(&g_stripes[i].lock);
}

void mp_live_set_limit(size_t max_entries)
{
    atomic_store_explicit(&g_limit, max_entries, memory_order_relaxed);
}

uint64_t mp_live_count(void) { return atomic_load_explicit(&g_count, memory_order_relaxed); }

uint64_t mp_live_bytes(void)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        n += s->cap * sizeof *s->slots + (s->counts != NULL ? SLOTS_PER_STRIPE : 0);
        mp_lock_release(&s->lock);
    }
    return n;
}

static inline uint32_t filter_slot(uintptr_t p) { return mp_prof_hook_filter_slot((void *)p); }

/* Home index of p in a table of 2^(64 - shift) slots: the top bits of a
 * Fibonacci multiply, which depend on every bit of p from its lowest set
 * one up (the filter slot, which chose the stripe, is other bits). */
static inline size_t home(uintptr_t p, unsigned shift)
{
    return (size_t)(((uint64_t)p * 0x9E3779B97F4A7C15ULL) >> shift);
}

/* The shift of home() for a table of cap slots (a power of two >= 2). */
static unsigned shift_of(size_t cap) { return 64u - (unsigned)__builtin_ctzll(cap); }

/* Both levels of a word change under its stripe's lock only (the stripe
 * of slot s is s >> SLOT_BITS, which holds all 64 slots of its word), so a
 * plain read and an atomic store suffice (no read-modify-write): no other
 * writer can come between them, and readers see the old or the new word. */
static void filter_set(uint32_t slot)
{
    uint32_t w = slot >> 6;
    uint64_t x = __atomic_load_n(&mp_prof_hook_filter.bits[w], __ATOMIC_RELAXED);
    __atomic_store_n(&mp_prof_hook_filter.bits[w], x | (uint64_t)1 << (slot & 63),
                     __ATOMIC_RELAXED);
}

static void filter_clear(uint32_t slot)
{
    uint32_t w = slot >> 6;
    uint64_t x = __atomic_load_n(&mp_prof_hook_filter.bits[w], __ATOMIC_RELAXED);
    __atomic_store_n(&mp_prof_hook_filter.bits[w], x & ~((uint64_t)1 << (slot & 63)),
                     __ATOMIC_RELAXED);
}

/* One entry more (+1) or less (-1) on p's page: its summary byte. */
static void summary_add(uintptr_t p, int d)
{
    uint8_t *b = &mp_prof_hook_filter.summary[MP_PROF_HOOK_SUMMARY_INDEX_(p)];
    uint8_t v = __atomic_load_n(b, __ATOMIC_RELAXED);
    if (v < 255)
        __atomic_store_n(b, (uint8_t)(v + d), __ATOMIC_RELAXED);
}

/* Index of p in s, or s->cap if absent. NULL is never in the table, but
 * 0 also marks an empty slot: without the check a free(NULL) whose filter
 * slot a sampled block shares would "find" the first empty slot. */
static inline __attribute__((always_inline)) size_t find(const stripe *s, uintptr_t p)
{
    if (s->cap == 0 || p == 0)
        return s->cap;
    for (size_t i = home(p, s->shift);; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i].ev.ptr == p)
            return i;
        if (s->slots[i].ev.ptr == 0)
            return s->cap;
    }
}

/* Doubles the table (the first one, and the filter counts, at the first
 * insertion). */
static bool grow(stripe *s)
{
    if (s->counts == NULL && (s->counts = calloc(SLOTS_PER_STRIPE, 1)) == NULL)
        return false;
    size_t ncap = s->cap ? s->cap * 2 : 64;
    entry *n = aligned_alloc(64, ncap * sizeof *n);
    if (n == NULL)
        return false;
    memset(n, 0, ncap * sizeof *n);
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slots[i].ev.ptr == 0)
            continue;
        size_t k = home(s->slots[i].ev.ptr, shift_of(ncap));
        while (n[k].ev.ptr != 0)
            k = (k + 1) & (ncap - 1);
        n[k] = s->slots[i];
    }
    free(s->slots);
    s->slots = n;
    s->cap = ncap;
    s->shift = shift_of(ncap);
    s->grow_at = ncap / 4 * 3;
    return true;
}

/* Backward-shift deletion of slot i (linear probing). */
static void erase(stripe *s, size_t i)
{
    size_t mask = s->cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (s->slots[j].ev.ptr == 0)
            break;
        size_t k = home(s->slots[j].ev.ptr, s->shift);
        /* j's entry may move to i iff its home k is not in (i, j] (cyclically). */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i].ev.ptr = 0;
    s->count--;
}

/* Copies stripe s (locked, marked) into its reserved part of the snapshot
 * and unmarks it: the stripe as it was at the instant, since every change
 * since then would have come through here first. */
static void snap_copy(stripe *s)
{
    uint64_t t0 = mp_now_nanos();
    mp_live_sample *out = g_snap.v + s->snap_off;
    size_t n = 0;
    for (size_t i = 0; i < s->cap && n < s->snap_room; i++) {
        const entry *e = &s->slots[i];
        if (e->ev.ptr != 0 && e->gen == g_snap.gen)
            out[n++] = (mp_live_sample){e->ev.stack, e->ev.size, e->ev.weight, e->gen, e->born};
    }
    s->snap_n = n;
    s->snap_pending = false;
    uint64_t dt = mp_now_nanos() - t0;
    uint64_t m = atomic_load_explicit(&g_snap.max_copy_ns, memory_order_relaxed);
    while (dt > m && !atomic_compare_exchange_weak_explicit(
                         &g_snap.max_copy_ns, &m, dt, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* s, opaque to the compiler: it then stays in one register, where gcc
 * otherwise recomputes the stripe's address (index, shift, add) at each
 * use in the insertion and the removal. */
static inline stripe *pin(stripe *s)
{
    __asm__("" : "+r"(s));
    return s;
}

/* The slot of p in s (cap != 0): p's entry, or the empty slot where
 * it would go. */
static inline __attribute__((always_inline)) entry *probe(const stripe *s, uintptr_t p)
{
    size_t mask = s->cap - 1;
    for (size_t k = home(p, s->shift);; k = (k + 1) & mask)
        if (s->slots[k].ev.ptr == p || s->slots[k].ev.ptr == 0)
            return &s->slots[k];
}

/* The rare parts of an insertion, out of line (under the stripe lock).
 * A stale entry of p (a free we could not see) is replaced in place. */
static __attribute__((noinline, cold)) void replace(entry *e, const mp_stack *stack, uint64_t size,
                                                    double weight, uint64_t gen, uint64_t born)
{
    mp_peak_remove(&e->ev);
    *e = (entry){{e->ev.ptr, stack, size, weight, mp_peak_insert(weight * (double)(int64_t)size)},
                 gen,
                 born};
}

/* The live count is at its limit (n, the count before this insertion, at
 * or above it), or the table must grow first: the slot of p after that,
 * or NULL when p cannot go in (the count is then given back). */
static __attribute__((noinline, cold)) entry *room(stripe *s, uintptr_t p, uint64_t n)
{
    if (n >= atomic_load_explicit(&g_limit, memory_order_relaxed) ||
        (s->count >= s->grow_at && !grow(s))) {
        atomic_fetch_sub_explicit(&g_count, 1, memory_order_relaxed);
        return NULL;
    }
    return probe(s, p);
}

/* (double)(int64_t)size below: a block's size is below 2^63 (PTRDIFF_MAX),
 * so the signed conversion is exact and needs no unsigned one's test.
 * The common case is one probe, one count against the limit and one
 * against the table's fill, the entry, its peak event and the filter;
 * everything else is in replace() and room(). */
bool mp_live_insert(uintptr_t p, const mp_stack *stack, uint64_t size, double weight, uint64_t gen,
                    uint64_t born)
{
    uint32_t slot = filter_slot(p);
    stripe *s = pin(&g_stripes[slot >> SLOT_BITS]);
    mp_lock_take(&s->lock);
    if (__builtin_expect(s->snap_pending, 0))
        snap_copy(s);
    /* an empty table has grow_at 0: room() makes the first one */
    entry *e = s->cap != 0 ? probe(s, p) : NULL;
    if (__builtin_expect(e != NULL && e->ev.ptr == p, 0)) {
        replace(e, stack, size, weight, gen, born);
        mp_lock_release(&s->lock);
        return true;
    }
    uint64_t n = atomic_fetch_add_explicit(&g_count, 1, memory_order_relaxed);
    if (__builtin_expect(n >= atomic_load_explicit(&g_limit, memory_order_relaxed) ||
                             s->count >= s->grow_at,
                         0) &&
        (e = room(s, p, n)) == NULL) {
        mp_lock_release(&s->lock);
        return false;
    }
    *e = (entry){
        {p, stack, size, weight, mp_peak_insert(weight * (double)(int64_t)size)}, gen, born};
    s->count++;
    uint8_t *c = &s->counts[slot & (SLOTS_PER_STRIPE - 1)];
    if (*c < 255)
        (*c)++;
    filter_set(slot);
    summary_add(p, 1);
    mp_lock_release(&s->lock);
    return true;
}

void mp_live_remove(uintptr_t p, uint64_t id)
{
    uint32_t slot = filter_slot(p);
    stripe *s = pin(&g_stripes[slot >> SLOT_BITS]);
    mp_lock_take(&s->lock);
    /* probe() stops at p's entry or an empty slot; for p = 0 (free(NULL),
     * whose filter slot a sampled block may share) at an empty one. */
    entry *e = s->cap != 0 ? probe(s, p) : NULL;
    if (e != NULL && e->ev.ptr != 0 && (id == 0 || e->ev.seq == id)) {
        if (__builtin_expect(s->snap_pending, 0))
            snap_copy(s); /* before the entry goes (the copy keeps no index) */
        mp_peak_remove(&e->ev);
        erase(s, (size_t)(e - s->slots));
        atomic_fetch_sub_explicit(&g_count, 1, memory_order_relaxed);
        uint8_t *c = &s->counts[slot & (SLOTS_PER_STRIPE - 1)];
        if (*c < 255 && --*c == 0)
            filter_clear(slot);
        summary_add(p, -1);
    }
    mp_lock_release(&s->lock);
}

uint64_t mp_live_id(uintptr_t p)
{
    uint32_t slot = filter_slot(p);
    stripe *s = &g_stripes[slot >> SLOT_BITS];
    uint64_t id = 0;
    mp_lock_take(&s->lock);
    size_t i = find(s, p);
    if (i != s->cap)
        id = s->slots[i].ev.seq;
    mp_lock_release(&s->lock);
    return id;
}

void mp_live_visit(uint64_t gen, mp_live_visit_fn fn, void *ctx)
{
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i].ev.ptr != 0 && s->slots[i].gen == gen)
                fn(ctx, s->slots[i].ev.stack, s->slots[i].ev.size, s->slots[i].ev.weight,
                   s->slots[i].born);
        mp_lock_release(&s->lock);
    }
}

unsigned mp_live_stripe(uintptr_t p) { return filter_slot(p) >> SLOT_BITS; }

void mp_live_visit_upto(uint64_t gen, uint64_t upto, mp_live_peak_fn fn, void *ctx,
                        uint64_t visited[MP_LIVE_STRIPES])
{
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        visited[k] = mp_peak_seq();
        for (size_t i = 0; i < s->cap; i++) {
            const entry *e = &s->slots[i];
            if (e->ev.ptr != 0 && e->gen == gen && e->ev.seq <= upto)
                fn(ctx, e->ev.stack, e->ev.size, e->ev.weight);
        }
        mp_lock_release(&s->lock);
    }
}

void mp_live_clear(void)
{
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        s->snap_pending = false;
        for (size_t i = 0; i < s->cap; i++) /* the summary bytes of its pages */
            if (s->slots[i].ev.ptr != 0)
                __atomic_store_n(
                    &mp_prof_hook_filter.summary[MP_PROF_HOOK_SUMMARY_INDEX_(s->slots[i].ev.ptr)],
                    0, __ATOMIC_RELAXED);
        free(s->slots);
        free(s->counts);
        s->slots = NULL;
        s->counts = NULL;
        s->cap = 0;
        s->count = 0;
        s->grow_at = 0;
        for (unsigned w = k * (SLOTS_PER_STRIPE / 64); w < (k + 1) * (SLOTS_PER_STRIPE / 64); w++)
            __atomic_store_n(&mp_prof_hook_filter.bits[w], 0, __ATOMIC_RELAXED);
        mp_lock_release(&s->lock);
    }
    atomic_store_explicit(&g_count, 0, memory_order_relaxed);
    mp_peak_reset();
}

void mp_live_adopt(uint64_t gen)
{
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i].ev.ptr != 0)
                s->slots[i].gen = gen;
        mp_lock_release(&s->lock);
    }
}

/* ---------------------------------------------------------------- snapshot
 *
 * A consistent copy of the table without stopping it for the whole copy.
 * At the instant (rw exclusive: no insert or remove runs) every stripe is
 * marked and given room for its count; afterwards the first insert or
 * remove on a marked stripe copies that stripe before changing it (one
 * stripe, under its own lock: the longest any hit or free waits), and
 * mp_live_snap_collect copies the stripes nobody touched. Every stripe is
 * thus copied exactly as it was at the instant. */

bool mp_live_snap_begin(uint64_t gen)
{
    size_t total = 0;
    for (unsigned k = 0; k < STRIPES; k++)
        total += g_stripes[k].count; /* stable: rw exclusive */
    mp_live_sample *v = malloc((total ? total : 1) * sizeof *v);
    if (v == NULL)
        return false;
    g_snap.v = v;
    g_snap.gen = gen;
    atomic_store_explicit(&g_snap.max_copy_ns, 0, memory_order_relaxed);
    size_t off = 0;
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        s->snap_off = off;
        s->snap_room = s->count;
        s->snap_n = 0;
        s->snap_pending = true;
        off += s->count;
        mp_lock_release(&s->lock);
    }
    return true;
}

size_t mp_live_snap_collect(mp_live_sample **out, uint64_t *max_copy_ns)
{
    size_t n = 0;
    for (unsigned k = 0; k < STRIPES; k++) {
        stripe *s = &g_stripes[k];
        mp_lock_take(&s->lock);
        if (s->snap_pending)
            snap_copy(s);
        size_t off = s->snap_off, got = s->snap_n;
        mp_lock_release(&s->lock);
        /* Close the gaps left by entries of other generations (rare). */
        if (n != off && got != 0)
            memmove(g_snap.v + n, g_snap.v + off, got * sizeof *g_snap.v);
        n += got;
    }
    *out = g_snap.v;
    g_snap.v = NULL;
    *max_copy_ns = atomic_load_explicit(&g_snap.max_copy_ns, memory_order_relaxed);
    return n;
}
