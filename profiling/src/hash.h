/* SPDX-License-Identifier: MIT */
/* Internal to mimprof-profiling: the hash functions of its tables off
 * the allocation path (index.h). The live table and
 * the stack depot keep their own, tuned for the sampling path. */
#ifndef MIMPROF_PROFILING_HASH_H
#define MIMPROF_PROFILING_HASH_H

#include <stddef.h>
#include <stdint.h>

/* index.h places a key by its hash's top bits and tells keys apart by
 * the top 32: every hash here mixes every input bit into those. */

/* murmur3's 64-bit finaliser: every input bit reaches every output bit. */
static inline uint64_t mp_hash_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

#define MP_HASH_SEED 1469598103934665603ull

/* One FNV-1a step over a 64-bit word (a stack's location indices); the
 * sum of the steps wants mp_hash_mix at the end. */
static inline uint64_t mp_hash_step(uint64_t h, uint64_t word)
{
    return (h ^ word) * 1099511628211ull;
}

/* FNV-1a over n bytes, finished by mp_hash_mix (alone, FNV's last byte
 * moves few of the top bits). */
static inline uint64_t mp_hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = MP_HASH_SEED;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return mp_hash_mix(h);
}

/* The same over a NUL-terminated string (its bytes without the NUL). */
static inline uint64_t mp_hash_str(const char *s)
{
    uint64_t h = MP_HASH_SEED;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return mp_hash_mix(h);
}

/* A pointer or address: Fibonacci hashing, whose top bits (the ones
 * index.h uses) depend on every bit of p. */
static inline uint64_t mp_hash_ptr(uintptr_t p) { return (uint64_t)p * 0x9E3779B97F4A7C15ull; }

#endif
