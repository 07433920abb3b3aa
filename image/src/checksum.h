/* XXH64 (seed 0): the image checksum and the type-table digest.
 * Streaming, so the writer can hash what it writes as it writes it. */
#ifndef MP_IMG_CHECKSUM_H
#define MP_IMG_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

struct img_hash {
    uint64_t v[4];         /* the four lanes */
    uint64_t total;        /* bytes fed so far */
    unsigned char buf[32]; /* a partial stripe */
    size_t buffered;       /* bytes in buf, always < 32 */
};

void img_hash_init(struct img_hash *h);
void img_hash_update(struct img_hash *h, const void *data, size_t len);
uint64_t img_hash_final(const struct img_hash *h);

/* One-shot XXH64 of `len` bytes. */
uint64_t img_hash(const void *data, size_t len);

#endif /* MP_IMG_CHECKSUM_H */
