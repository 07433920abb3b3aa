/* SPDX-License-Identifier: MIT */
/* Internal to mimprof-profiling: the open-addressing index of its tables
 * off the allocation path (the report side, aggregation, heap images, the
 * cumulative profile). The caller keeps its records in its own array and
 * hashes its keys (hash.h); the index maps a hash to the numbers of the
 * records that may hold the key, and the caller compares keys:
 *
 *     if (!mp_index_reserve(&ix))               // room for one more
 *         return NOMEM;
 *     mp_index_probe p = mp_index_start(&ix, hash);
 *     uint32_t i;
 *     while (mp_index_next(&p, &i))
 *         if (equal(&recs[i], key))
 *             return i;                         // found
 *     i = append(recs, key);                    // absent: add it
 *     mp_index_put(&ix, &p, i);
 *
 * A slot is one word, the hash's top 32 bits over the value + 1, so that
 * growing rehashes without the records and a candidate reaches the
 * caller's compare only when 32 bits of its hash agree. Nothing is ever
 * removed (no tombstones): a table that drops records rebuilds or frees
 * its index. Not thread-safe: a table's owner serialises its use. */
#ifndef MIMPROF_PROFILING_INDEX_H
#define MIMPROF_PROFILING_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where an index's slots come from when not from calloc and free: a
 * caller whose memory must not pass through the sampled malloc (the
 * control's arena) gives its own. */
typedef struct mp_index_mem {
    void *(*zalloc)(void *ctx, size_t bytes); /* zeroed, or NULL */
    void (*release)(void *ctx, void *p);      /* NULL: freed with ctx */
} mp_index_mem;

/* Invariants: cap is 0 (slots NULL) or a power of two 2^(64 - shift)
 * <= 2^32; at most half the slots are used (n * 2 <= cap), so a probe
 * always ends at an empty slot; a used slot holds (hash & MP_INDEX_TAG) |
 * (value + 1), placed by linear probing from hash >> shift (the hash's
 * top bits: multiplicative hashes are best there). A zero-initialised
 * index is empty, its slots from calloc. */
typedef struct mp_index {
    uint64_t *slots; /* 0 = empty */
    size_t cap;
    unsigned shift;
    size_t n;                /* values put */
    const mp_index_mem *mem; /* NULL: calloc and free */
    void *mem_ctx;
} mp_index;

#define MP_INDEX_TAG 0xffffffff00000000ull

/* Values the index can hold: a slot's tag (32 hash bits) places it when
 * the index grows, so the capacity stops at 2^32 slots, half of them
 * used. */
#define MP_INDEX_MAX_VALUES ((size_t)1 << 31)

/* Where a lookup stands: the next slot to look at and the hash. */
typedef struct mp_index_probe {
    const uint64_t *slots;
    size_t at, mask;
    uint64_t hash;
} mp_index_probe;

/* Grows the index (doubling, from 256 slots) to room for `more` values
 * more and rehashes it (by the tags alone); false on out-of-memory or past
 * MP_INDEX_MAX_VALUES, the index then unchanged. */
bool mp_index_grow(mp_index *ix, size_t more);

/* Makes room for `more` values more (the index stays at most half full):
 * false on out-of-memory, the index then unchanged and still usable. A
 * caller that puts several keys in a row reserves for all of them once. */
static inline bool mp_index_reserve_n(mp_index *ix, size_t more)
{
    return (ix->n + more) * 2 <= ix->cap || mp_index_grow(ix, more);
}

/* Room for one value more. */
static inline bool mp_index_reserve(mp_index *ix) { return mp_index_reserve_n(ix, 1); }

/* The one slot an empty, never-grown index probes: lookups in it find
 * nothing without a test of their own. */
extern const uint64_t mp_index_no_slot;

/* Starts a lookup of `hash`. The probe is valid until the index grows. */
static inline mp_index_probe mp_index_start(const mp_index *ix, uint64_t hash)
{
    if (ix->cap == 0)
        return (mp_index_probe){&mp_index_no_slot, 0, 0, 0};
    size_t mask = ix->cap - 1;
    return (mp_index_probe){ix->slots, (size_t)(hash >> ix->shift), mask, hash};
}

/* The next candidate of the lookup (a value whose hash has the same top
 * 32 bits) in *value: true; false when there is none left, the probe then
 * standing on the empty slot where mp_index_put puts the key. */
static inline bool mp_index_next(mp_index_probe *p, uint32_t *value)
{
    for (uint64_t e; (e = p->slots[p->at]) != 0;) {
        p->at = (p->at + 1) & p->mask;
        if (((e ^ p->hash) >> 32) == 0) { /* the tags agree */
            *value = (uint32_t)e - 1;
            return true;
        }
    }
    return false;
}

/* Puts `value` (< UINT32_MAX) at the empty slot a lookup ended on: the
 * lookup must have found no equal key, room must be reserved for this
 * value, and nothing was put or grown since the lookup started. */
static inline void mp_index_put(mp_index *ix, const mp_index_probe *p, uint32_t value)
{
    ix->slots[p->at] = (p->hash & MP_INDEX_TAG) | ((uint64_t)value + 1);
    ix->n++;
}

/* Bytes the index holds. */
static inline size_t mp_index_bytes(const mp_index *ix) { return ix->cap * sizeof *ix->slots; }

/* Frees the slots; the index is then empty (and usable again, with the
 * same memory). */
void mp_index_free(mp_index *ix);

/* The records' side: grows the array *p (elements of `elem` bytes,
 * capacity *cap) to hold `need`, doubling from 64; false on out-of-memory
 * or overflow (*p and *cap unchanged). */
bool mp_array_grow(void **p, size_t *cap, size_t need, size_t elem);

/* mp_array_grow when the array is too small (inline: callers reserve one
 * more element per record). */
static inline bool mp_array_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap || mp_array_grow(p, cap, need, elem);
}

#endif
