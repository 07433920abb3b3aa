/* SPDX-License-Identifier: MIT */
/* Internal to mimprof-profiling: the hash functions of its tables off
 * the allocation path (the report side, aggregation). The live table and
 * the stack depot keep their own, tuned for the sampling path. */
#ifndef MIMPROF_PROFILING_HASH_H
#define MIMPROF_PROFILING_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a, 64 bits, of a NUL-terminated string. */
static inline uint64_t mp_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* One FNV-1a step over a 64-bit word (a stack's location indices). */
static inline uint64_t mp_hash_step(uint64_t h, uint64_t word)
{
    return (h ^ word) * 1099511628211ull;
}

#define MP_HASH_SEED 1469598103934665603ull

/* murmur3's 64-bit finaliser: every input bit reaches the low bits a
 * table indexes with. */
static inline size_t mp_hash_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (size_t)x;
}

/* A pointer or address: Fibonacci multiplication, high bits folded down
 * (aligned pointers have zero low bits). */
static inline size_t mp_hash_ptr(uintptr_t p)
{
    uint64_t x = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 31));
}

#endif
