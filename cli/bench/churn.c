/* SPDX-License-Identifier: MIT */
/* mimprof-churn: a fixed amount of allocation churn, for timing `mimprof
 * run` against the plain allocator (bench/run.sh, with hyperfine).
 *
 *   mimprof-churn [OPERATIONS]   (default 50,000,000)
 *
 * One thread; each operation frees the oldest of 1024 live objects and
 * allocates a new one of a service-like size: 80% 16-256 B, 18% 257 B-
 * 4 KiB, 2% 4-64 KiB (the mix of the alloc-1m-1w workload in tests/bench),
 * touching its first byte. Plain malloc/free: the allocator and the
 * profiler come in by LD_PRELOAD. Prints a checksum so that nothing is
 * optimised away. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { SLOTS = 1024 };

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick_size(uint64_t r)
{
    unsigned bucket = (unsigned)(r % 100);
    r /= 100;
    if (bucket < 80)
        return 16 + (size_t)(r % 241);
    if (bucket < 98)
        return 257 + (size_t)(r % 3840);
    return 4097 + (size_t)(r % 61440);
}

int main(int argc, char **argv)
{
    unsigned long long ops = argc > 1 ? strtoull(argv[1], NULL, 10) : 50000000ull;
    unsigned char *slot[SLOTS] = {0};
    uint64_t rng = 0x9e3779b97f4a7c15ull, sum = 0;
    for (unsigned long long i = 0; i < ops; i++) {
        size_t k = i % SLOTS;
        free(slot[k]);
        size_t n = pick_size(next(&rng));
        slot[k] = malloc(n);
        if (slot[k] == NULL)
            return 1;
        slot[k][0] = (unsigned char)i;
        sum += slot[(k * 7) % SLOTS] != NULL ? slot[(k * 7) % SLOTS][0] : 0;
    }
    for (size_t k = 0; k < SLOTS; k++)
        free(slot[k]);
    printf("mimprof-churn: %llu operations, checksum %llu\n", ops, (unsigned long long)sum);
    return 0;
}
