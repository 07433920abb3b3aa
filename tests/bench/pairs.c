/* SPDX-License-Identifier: MIT */
/*
 * mimprof-bench-pairs: a fixed number of malloc/free pairs, for counting
 * instructions per pair under callgrind (scripts/callgrind_peers.sh) with
 * every allocator and profiler brought in by LD_PRELOAD.
 *
 *   mimprof-bench-pairs PAIRS [THREADS]
 *
 * One thread (or THREADS, each doing PAIRS pairs of its own: the work
 * grows with the threads), a sliding window of 4,096 live blocks per
 * thread: each pair frees the oldest block and allocates one of
 * 16..2063 bytes (uniform, xorshift, a stream per thread), touching its
 * first byte. Linked with no allocator: the same binary runs
 * under each configuration. Counting the whole process for PAIRS and
 * 2 x PAIRS and taking the difference cancels start-up and the exit
 * report, leaving the cost of PAIRS pairs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { WINDOW = 4096, MAX_THREADS = 64 };

typedef struct job {
    unsigned long long pairs;
    uint64_t rng;
    unsigned sum;
    int failed;
} job;

static void *churn(void *arg)
{
    job *j = arg;
    unsigned long long pairs = j->pairs;
    unsigned char **slot = calloc(WINDOW, sizeof *slot);
    if (slot == NULL) {
        j->failed = 1;
        return NULL;
    }
    uint64_t rng = j->rng;
    unsigned sum = 0;
    for (unsigned long long i = 0; i < pairs; i++) {
        size_t k = i % WINDOW;
        free(slot[k]);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t n = 16 + (size_t)(rng % 2048);
        slot[k] = malloc(n);
        if (slot[k] == NULL) {
            j->failed = 1;
            return NULL;
        }
        slot[k][0] = (unsigned char)i;
        sum += slot[(k * 7) % WINDOW] ? slot[(k * 7) % WINDOW][0] : 0;
    }
    for (size_t k = 0; k < WINDOW; k++)
        free(slot[k]);
    free(slot);
    j->sum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: mimprof-bench-pairs PAIRS [THREADS]\n");
        return 2;
    }
    unsigned long long pairs = strtoull(argv[1], NULL, 10);
    int threads = argc == 3 ? atoi(argv[2]) : 1;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "mimprof-bench-pairs: THREADS is 1..%d\n", MAX_THREADS);
        return 2;
    }
    static job jobs[MAX_THREADS];
    static pthread_t tid[MAX_THREADS];
    for (int t = 0; t < threads; t++)
        jobs[t] = (job){pairs, 0x9e3779b97f4a7c15ull + (uint64_t)t * 0x2545f4914f6cdd1dull, 0, 0};
    if (threads == 1) { /* the main thread alone, as before threads were an option */
        churn(&jobs[0]);
    } else {
        for (int t = 0; t < threads; t++)
            if (pthread_create(&tid[t], NULL, churn, &jobs[t]) != 0)
                return 1;
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
    }
    unsigned sum = 0;
    for (int t = 0; t < threads; t++) {
        if (jobs[t].failed)
            return 1;
        sum += jobs[t].sum;
    }
    printf("mimprof-bench-pairs: %llu pairs x %d thread(s), checksum %u\n", pairs, threads, sum);
    return 0;
}
