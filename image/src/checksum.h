/* SPDX-License-Identifier: MIT */
/* XXH3-64 (seed 0, default secret): the image checksums and the type-table
 * digest. Streaming, so that the writer hashes what it writes as it writes
 * it and the loader hashes what it reads in the pass that places it. The
 * stripe kernel is vectorised where the CPU allows (SSE2, AVX2 chosen at
 * run time on x86-64); every kernel gives the same value. */
#ifndef MP_IMG_CHECKSUM_H
#define MP_IMG_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

struct img_hash {
    uint64_t acc[8];        /* the accumulators */
    uint64_t total;         /* bytes fed so far */
    size_t stripes;         /* stripes of the current block consumed, < 16 */
    size_t buffered;        /* bytes in buf: 1..256 once anything was consumed */
    unsigned char tail[64]; /* the 64 bytes consumed last (for the last stripe) */
    unsigned char buf[256]; /* bytes not consumed yet */
};

void img_hash_init(struct img_hash *h);
void img_hash_update(struct img_hash *h, const void *data, size_t len);
uint64_t img_hash_final(const struct img_hash *h);

/* One-shot XXH3-64 of `len` bytes. */
uint64_t img_hash(const void *data, size_t len);

/* Which stripe kernel runs: 0 the best this CPU has, 1 portable C, 2 SSE2,
 * 3 AVX2 (a kernel the CPU lacks falls back to the best it has). Returns
 * the kernel now in use. For the tests, which check they all agree. */
int img_hash_kernel(int which);

#endif /* MP_IMG_CHECKSUM_H */
