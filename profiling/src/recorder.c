/* SPDX-License-Identifier: MIT */
/* Thread rings, the registry and the overflow shards.
 *
 * A thread's ring accepts records only once registered (the registry is a
 * list under one lock, taken with trylock from allocation hooks: contention
 * is a counted drop and a later hit retries). Reports drain registered
 * rings directly. A full ring hands its records to a global overflow shard
 * (oldest first); an exiting thread hands over what remains. Reports drain
 * rings and shards with fair shares of their budget.
 *
 * An overflow shard aggregates what it absorbs per stack (objects and
 * bytes as unrounded sums, and the number of records): its memory is
 * bounded by the number of distinct stacks, not by the sampling rate, so
 * a burst of samples between two reports costs no drops. A shard entry is
 * drained whole; it counts as its number of records against the budget.
 *
 * Accounting (cumulative counters in g_rec.c): every record that entered a
 * ring is, at any time, in exactly one of: a ring (ring_records), a shard
 * (overflow_records), consumed by a report (reported), discarded by a
 * session end (discarded), or lost when a handoff found every shard full
 * (dropped_overflow_full). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_SHARDS 64u

typedef struct shard_entry {
    const mp_stack *stack; /* NULL = empty */
    double objects, bytes;
    uint64_t records;
} shard_entry;

typedef struct shard {
    pthread_mutex_t lock;
    shard_entry *e;
    uint32_t cap;   /* power of two, or 0 */
    uint32_t count; /* entries in use */
    uint32_t limit; /* most entries this shard may hold */
    uint32_t scan;  /* drain cursor: entries before it were drained last */
    uint64_t records;
} shard;

static pthread_mutex_t g_registry = PTHREAD_MUTEX_INITIALIZER;
static mp_thread_rec *g_threads; /* registered rings, under g_registry */
static shard g_shards[MAX_SHARDS];
static unsigned g_nshards; /* written under rw exclusive, read under rw shared or session */

void mp_rec_init(void)
{
    for (unsigned i = 0; i < MAX_SHARDS; i++)
        pthread_mutex_init(&g_shards[i].lock, NULL);
}

mp_thread_rec *mp_rec_thread_new(uint64_t gen, unsigned ordinal, size_t ring_capacity,
                                 unsigned depth_capacity)
{
    mp_thread_rec *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ring.slots = malloc(ring_capacity * sizeof *t->ring.slots);
    t->pcs = malloc(depth_capacity * sizeof *t->pcs);
    if (t->ring.slots == NULL || t->pcs == NULL) {
        free(t->ring.slots);
        free(t->pcs);
        free(t);
        return NULL;
    }
    mp_lock_init(&t->lock);
    t->ring.cap = (uint32_t)ring_capacity;
    t->gen = gen;
    t->ordinal = ordinal;
    t->home_shard = g_nshards ? ordinal % g_nshards : 0;
    return t;
}

void mp_rec_thread_free(mp_thread_rec *t)
{
    if (t == NULL)
        return;
    free(t->ring.slots);
    free(t->pcs);
    free(t);
}

bool mp_rec_register(mp_thread_rec *t)
{
    if (pthread_mutex_trylock(&g_registry) != 0)
        return false;
    t->next = g_threads;
    t->prev = &g_threads;
    if (g_threads != NULL)
        g_threads->prev = &t->next;
    g_threads = t;
    t->registered = true;
    pthread_mutex_unlock(&g_registry);
    MP_COUNT(registered_threads, 1);
    return true;
}

static void unlink_locked(mp_thread_rec *t)
{
    *t->prev = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    t->next = NULL;
    t->prev = NULL;
    t->registered = false;
    MP_UNCOUNT(registered_threads, 1);
}

static size_t shard_slot(const mp_stack *st, uint32_t cap)
{
    return (size_t)(((uint64_t)(uintptr_t)st * 0x9E3779B97F4A7C15ULL) >> 24) & (cap - 1);
}

static bool shard_grow(shard *s)
{
    uint32_t ncap = s->cap ? s->cap * 2 : 64;
    shard_entry *n = calloc(ncap, sizeof *n);
    if (n == NULL)
        return false;
    for (uint32_t i = 0; i < s->cap; i++) {
        if (s->e[i].stack == NULL)
            continue;
        size_t k = shard_slot(s->e[i].stack, ncap);
        while (n[k].stack != NULL)
            k = (k + 1) & (ncap - 1);
        n[k] = s->e[i];
    }
    free(s->e);
    s->e = n;
    s->cap = ncap;
    s->scan = 0;
    return true;
}

/* Adds one record to shard s (locked): the entry of its stack, or NULL
 * when s cannot take that stack. */
static shard_entry *shard_add(shard *s, const mp_record *r)
{
    if (s->cap != 0) {
        for (size_t k = shard_slot(r->stack, s->cap);; k = (k + 1) & (s->cap - 1)) {
            if (s->e[k].stack == r->stack) {
                s->e[k].objects += r->weight;
                s->e[k].bytes += r->weight * (double)r->size;
                s->e[k].records++;
                s->records++;
                return &s->e[k];
            }
            if (s->e[k].stack == NULL)
                break;
        }
    }
    if (s->count >= s->limit)
        return NULL;
    if ((s->count + 1) * 2 > s->cap && !shard_grow(s))
        return NULL;
    size_t k = shard_slot(r->stack, s->cap);
    while (s->e[k].stack != NULL)
        k = (k + 1) & (s->cap - 1);
    s->e[k] = (shard_entry){r->stack, r->weight, r->weight * (double)r->size, 1};
    s->count++;
    s->records++;
    return &s->e[k];
}

/* The records r[0..k) of stack st that start r[0..max): their number k,
 * their sums added to *objects and *bytes. (double)(int64_t): a record's
 * size is below 2^63 (PTRDIFF_MAX), so the signed conversion is exact. */
static uint32_t run_of(const mp_record *r, uint32_t max, const mp_stack *st, double *objects,
                       double *bytes)
{
    double o = 0, b = 0;
    uint32_t k = 0;
    while (k < max && r[k].stack == st) {
        o += r[k].weight;
        b += r[k].weight * (double)(int64_t)r[k].size;
        k++;
    }
    *objects += o;
    *bytes += b;
    return k;
}

/* Moves the records of `f` (whose lock the caller holds), oldest first,
 * into shard s (locked) until f is empty or s cannot take a record's
 * stack; returns how many moved. A run of one stack (a loop's allocation
 * site: the common case) is summed in registers, one contiguous part of
 * the ring at a time, and added to its entry once, with no probe: the
 * entry shard_add returned is valid until the next add. */
static uint32_t absorb(shard *s, mp_fifo *f)
{
    const mp_record *slots = f->slots;
    uint32_t head = f->head, len = f->len, cap = f->cap, n = 0;
    while (len != 0) {
        shard_entry *e = shard_add(s, &slots[head]);
        if (e == NULL)
            break;
        double objects = 0, bytes = 0;
        uint32_t run = 0, k; /* records of the run after its first */
        if (++head == cap)
            head = 0;
        len--;
        do {
            uint32_t part = cap - head < len ? cap - head : len;
            k = run_of(slots + head, part, e->stack, &objects, &bytes);
            run += k;
            len -= k;
            head += k;
            if (head == cap)
                head = 0;
        } while (k != 0 && head == 0 && len != 0); /* the run goes on past the ring's end */
        e->objects += objects;
        e->bytes += bytes;
        e->records += run;
        s->records += run;
        n += run + 1;
    }
    f->head = len == 0 ? 0 : head;
    f->len = len;
    return n;
}

/* Moves the records of `f` (whose lock the caller holds), oldest first,
 * into the shards starting with `first`; returns how many remain in f. */
static uint32_t handoff(mp_fifo *f, unsigned first)
{
    for (unsigned k = 0; k < g_nshards && f->len != 0; k++) {
        shard *s = &g_shards[(first + k) % g_nshards];
        pthread_mutex_lock(&s->lock);
        uint32_t n = absorb(s, f);
        pthread_mutex_unlock(&s->lock);
        if (n != 0) {
            MP_UNCOUNT(ring_records, n);
            MP_COUNT(overflow_records, n);
        }
    }
    return f->len;
}

/* A full ring's push (the ring's lock held): hands the ring to the
 * shards first. Out of line, so that the common push saves no register. */
static __attribute__((noinline)) bool push_full(mp_thread_rec *t, const mp_record *r)
{
    handoff(&t->ring, t->home_shard);
    bool ok = mp_fifo_push(&t->ring, r);
    mp_lock_release(&t->lock);
    if (ok)
        MP_COUNT(ring_records, 1);
    return ok;
}

bool mp_rec_push(mp_thread_rec *t, const mp_record *r)
{
    mp_lock_take(&t->lock);
    if (__builtin_expect(t->ring.len == t->ring.cap, 0))
        return push_full(t, r);
    (void)mp_fifo_push(&t->ring, r); /* not full */
    mp_lock_release(&t->lock);
    MP_COUNT(ring_records, 1);
    return true;
}

/* The ending session publishes active_gen = 0 before it walks the
 * registry, so a thread may see its record go stale while the walk has not
 * reached it yet: it must not free the record outside the registry lock.
 * Under it, either the walk already unlinked the record, or it is unlinked
 * here with its records discarded (as the walk would have). */
void mp_rec_thread_release(mp_thread_rec *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&g_registry);
    mp_lock_take(&t->lock);
    if (t->registered) {
        MP_COUNT(discarded, t->ring.len);
        MP_UNCOUNT(ring_records, t->ring.len);
        mp_fifo_clear(&t->ring);
        unlink_locked(t);
    }
    mp_lock_release(&t->lock);
    pthread_mutex_unlock(&g_registry);
    mp_rec_thread_free(t);
}

uint64_t mp_rec_thread_exit(mp_thread_rec *t)
{
    uint64_t lost = 0;
    pthread_mutex_lock(&g_registry);
    mp_lock_take(&t->lock);
    if (t->registered) {
        lost = handoff(&t->ring, t->home_shard);
        unlink_locked(t);
    }
    if (lost != 0) {
        MP_UNCOUNT(ring_records, lost);
        mp_fifo_clear(&t->ring);
    }
    mp_lock_release(&t->lock);
    pthread_mutex_unlock(&g_registry);
    return lost;
}

bool mp_rec_session_begin(size_t nshards, size_t shard_stacks)
{
    if (nshards > MAX_SHARDS)
        nshards = MAX_SHARDS;
    for (unsigned i = 0; i < nshards; i++) {
        shard *s = &g_shards[i];
        pthread_mutex_lock(&s->lock);
        free(s->e);
        s->e = NULL;
        s->cap = s->count = s->scan = 0;
        s->records = 0;
        s->limit = shard_stacks > UINT32_MAX / 4 ? UINT32_MAX / 4 : (uint32_t)shard_stacks;
        pthread_mutex_unlock(&s->lock);
    }
    g_nshards = (unsigned)nshards;
    return true;
}

/* fork(): the registry is taken by a thread that is releasing a stale
 * record (mp_rec_thread_release) without holding g_rec.rw, so the
 * prepare handler takes it too (after g_rec.rw, the order of thread
 * exit's walk); the forking thread owns it in the child as well. */
void mp_rec_fork_prepare(void) { pthread_mutex_lock(&g_registry); }

void mp_rec_fork_parent(void) { pthread_mutex_unlock(&g_registry); }

void mp_rec_fork_child(void) { pthread_mutex_unlock(&g_registry); }

/* In a fork child: the threads that owned the registered records do not
 * exist there, so their records are freed (the caller's own, `keep`, is
 * left to its thread, which frees it at its next hit). */
void mp_rec_fork_child_release(mp_thread_rec *keep)
{
    pthread_mutex_lock(&g_registry);
    mp_thread_rec *t = g_threads;
    while (t != NULL) {
        mp_thread_rec *next = t->next;
        if (t != keep) {
            MP_UNCOUNT(ring_records, t->ring.len);
            MP_COUNT(discarded, t->ring.len);
            unlink_locked(t);
            mp_rec_thread_free(t);
        }
        t = next;
    }
    pthread_mutex_unlock(&g_registry);
}

uint64_t mp_rec_session_end(void)
{
    uint64_t discarded = 0;
    pthread_mutex_lock(&g_registry);
    while (g_threads != NULL) {
        mp_thread_rec *t = g_threads;
        mp_lock_take(&t->lock);
        discarded += t->ring.len;
        MP_UNCOUNT(ring_records, t->ring.len);
        mp_fifo_clear(&t->ring);
        unlink_locked(t);
        mp_lock_release(&t->lock);
    }
    pthread_mutex_unlock(&g_registry);
    for (unsigned i = 0; i < g_nshards; i++) {
        shard *s = &g_shards[i];
        pthread_mutex_lock(&s->lock);
        discarded += s->records;
        MP_UNCOUNT(overflow_records, s->records);
        free(s->e);
        s->e = NULL;
        s->cap = s->count = s->scan = 0;
        s->records = 0;
        pthread_mutex_unlock(&s->lock);
    }
    g_nshards = 0;
    return discarded;
}

/* Fair drain. Each round gives every nonempty source (registered ring or
 * shard) an equal share of the remaining budget (at least one record, or
 * one shard entry), so a budget smaller than the backlog is split between
 * rings and shards and neither starves. Records are copied out in chunks
 * and handed to fn after the source's lock is released. */
#define CHUNK 128u

static uint64_t drain_ring(mp_thread_rec *t, uint64_t share, mp_drain_fn fn, void *ctx)
{
    mp_record buf[CHUNK];
    uint64_t total = 0;
    while (total < share) {
        uint32_t want = share - total < CHUNK ? (uint32_t)(share - total) : CHUNK;
        mp_lock_take(&t->lock);
        uint32_t n = mp_fifo_take(&t->ring, buf, want);
        mp_lock_release(&t->lock);
        if (n == 0)
            break;
        MP_UNCOUNT(ring_records, n);
        for (uint32_t i = 0; i < n; i++)
            fn(ctx, buf[i].stack, buf[i].weight, buf[i].weight * (double)buf[i].size, 1);
        total += n;
    }
    return total;
}

/* Takes whole entries from the shard's cursor on until `share` records are
 * taken (at least one entry). */
static uint64_t drain_shard(shard *s, uint64_t share, mp_drain_fn fn, void *ctx)
{
    shard_entry buf[CHUNK];
    uint64_t total = 0;
    while (total < share) {
        unsigned n = 0;
        pthread_mutex_lock(&s->lock);
        for (uint32_t seen = 0; seen < s->cap && s->count != 0 && n < CHUNK; seen++) {
            shard_entry *e = &s->e[s->scan];
            s->scan = (s->scan + 1) & (s->cap - 1);
            if (e->stack == NULL)
                continue;
            if (total + e->records > share && (total != 0 || n != 0))
                break;
            buf[n++] = *e;
            total += e->records;
            s->records -= e->records;
            s->count--;
            e->stack = NULL;
            if (total >= share)
                break;
        }
        if (s->count == 0 && s->cap != 0) { /* rebuild lazily: no tombstones needed */
            free(s->e);
            s->e = NULL;
            s->cap = s->scan = 0;
        }
        pthread_mutex_unlock(&s->lock);
        if (n == 0)
            break;
        uint64_t recs = 0;
        for (unsigned i = 0; i < n; i++) {
            fn(ctx, buf[i].stack, buf[i].objects, buf[i].bytes, buf[i].records);
            recs += buf[i].records;
        }
        MP_UNCOUNT(overflow_records, recs);
    }
    return total;
}

static unsigned g_rotor; /* alternates which kind of source goes first */

static uint64_t drain_rings(uint64_t share, uint64_t left, mp_drain_fn fn, void *ctx)
{
    uint64_t n = 0;
    for (mp_thread_rec *t = g_threads; t != NULL && n < left; t = t->next)
        n += drain_ring(t, share < left - n ? share : left - n, fn, ctx);
    return n;
}

static uint64_t drain_shards(uint64_t share, uint64_t left, mp_drain_fn fn, void *ctx)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < g_nshards && n < left; i++)
        n += drain_shard(&g_shards[i], share < left - n ? share : left - n, fn, ctx);
    return n;
}

uint64_t mp_rec_drain(uint64_t budget, mp_drain_fn fn, void *ctx)
{
    uint64_t done = 0;
    pthread_mutex_lock(&g_registry);
    bool rings_first = (g_rotor++ & 1) == 0;
    while (done < budget) {
        uint64_t sources = 0;
        for (mp_thread_rec *t = g_threads; t != NULL; t = t->next) {
            mp_lock_take(&t->lock);
            sources += t->ring.len != 0;
            mp_lock_release(&t->lock);
        }
        for (unsigned i = 0; i < g_nshards; i++) {
            pthread_mutex_lock(&g_shards[i].lock);
            sources += g_shards[i].count != 0;
            pthread_mutex_unlock(&g_shards[i].lock);
        }
        if (sources == 0)
            break;
        uint64_t share = (budget - done) / sources;
        if (share == 0)
            share = 1;
        uint64_t round = 0;
        if (rings_first) {
            round += drain_rings(share, budget - done, fn, ctx);
            if (done + round < budget)
                round += drain_shards(share, budget - done - round, fn, ctx);
        } else {
            round += drain_shards(share, budget - done, fn, ctx);
            if (done + round < budget)
                round += drain_rings(share, budget - done - round, fn, ctx);
        }
        done += round;
        if (round == 0)
            break;
    }
    pthread_mutex_unlock(&g_registry);
    return done;
}

/* Heap images read what waits without consuming it: the next report still
 * gets every record, and the accounting above is untouched. */
void mp_rec_peek(mp_drain_fn fn, void *ctx)
{
    pthread_mutex_lock(&g_registry);
    for (mp_thread_rec *t = g_threads; t != NULL; t = t->next) {
        mp_lock_take(&t->lock);
        const mp_fifo *f = &t->ring;
        for (uint32_t i = 0, k = f->head; i < f->len; i++) {
            const mp_record *r = &f->slots[k];
            fn(ctx, r->stack, r->weight, r->weight * (double)r->size, 1);
            if (++k == f->cap)
                k = 0;
        }
        mp_lock_release(&t->lock);
    }
    pthread_mutex_unlock(&g_registry);
    for (unsigned i = 0; i < g_nshards; i++) {
        shard *s = &g_shards[i];
        pthread_mutex_lock(&s->lock);
        for (uint32_t k = 0; k < s->cap; k++)
            if (s->e[k].stack != NULL)
                fn(ctx, s->e[k].stack, s->e[k].objects, s->e[k].bytes, s->e[k].records);
        pthread_mutex_unlock(&s->lock);
    }
}
