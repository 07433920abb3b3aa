/* SPDX-License-Identifier: MIT */
/*
 * mimprof-bench-pairs: a fixed number of malloc/free pairs, for counting
 * instructions per pair under callgrind (scripts/callgrind_peers.sh) with
 * every allocator and profiler brought in by LD_PRELOAD.
 *
 *   mimprof-bench-pairs PAIRS
 *
 * One thread, a sliding window of 4,096 live blocks: each pair frees the
 * oldest block and allocates one of 16..2063 bytes (uniform, xorshift),
 * touching its first byte. Linked with no allocator: the same binary runs
 * under each configuration. Counting the whole process for PAIRS and
 * 2 x PAIRS and taking the difference cancels start-up and the exit
 * report, leaving the cost of PAIRS pairs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { WINDOW = 4096 };

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mimprof-bench-pairs PAIRS\n");
        return 2;
    }
    unsigned long long pairs = strtoull(argv[1], NULL, 10);
    static unsigned char *slot[WINDOW];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    unsigned sum = 0;
    for (unsigned long long i = 0; i < pairs; i++) {
        size_t k = i % WINDOW;
        free(slot[k]);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t n = 16 + (size_t)(rng % 2048);
        slot[k] = malloc(n);
        if (slot[k] == NULL)
            return 1;
        slot[k][0] = (unsigned char)i;
        sum += slot[(k * 7) % WINDOW] ? slot[(k * 7) % WINDOW][0] : 0;
    }
    for (size_t k = 0; k < WINDOW; k++)
        free(slot[k]);
    printf("mimprof-bench-pairs: %llu pairs, checksum %u\n", pairs, sum);
    return 0;
}
