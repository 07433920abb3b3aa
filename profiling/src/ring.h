/* SPDX-License-Identifier: MIT */
/* The record FIFO shared by thread rings and overflow shards: a fixed
 * array with head/length indices.
 *
 * Invariants: 0 <= head < cap (or cap == 0), 0 <= len <= cap; the records
 * are slots[head], slots[(head+1) % cap], ... oldest first. A consumer
 * takes from the head and advances it by exactly what it consumed: the
 * remaining records are never moved (no compaction), so a partial drain
 * costs only what it took. Not synchronized: the owner of the FIFO's lock
 * calls these. */
#ifndef MIMPROF_PROFILING_RING_H
#define MIMPROF_PROFILING_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mp_stack;

/* One sampling hit: a stack, the requested size and the estimator weight
 * (objects this sample stands for). */
typedef struct mp_record {
    const struct mp_stack *stack;
    uint64_t size;
    double weight;
} mp_record;

typedef struct mp_fifo {
    mp_record *slots;
    uint32_t cap;
    uint32_t head;
    uint32_t len;
} mp_fifo;

static inline uint32_t mp_fifo_space(const mp_fifo *f) { return f->cap - f->len; }

/* Appends r; false when full. */
static inline bool mp_fifo_push(mp_fifo *f, const mp_record *r)
{
    if (f->len == f->cap)
        return false;
    uint32_t tail = f->head + f->len;
    if (tail >= f->cap)
        tail -= f->cap;
    f->slots[tail] = *r;
    f->len++;
    return true;
}

/* Copies up to `max` of the oldest records to out[] and consumes them. */
static inline uint32_t mp_fifo_take(mp_fifo *f, mp_record *out, uint32_t max)
{
    uint32_t n = f->len < max ? f->len : max;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = f->slots[f->head];
        if (++f->head == f->cap)
            f->head = 0;
    }
    f->len -= n;
    if (f->len == 0)
        f->head = 0; /* cheap normalization; no record moves */
    return n;
}

static inline void mp_fifo_clear(mp_fifo *f)
{
    f->head = 0;
    f->len = 0;
}

#endif
