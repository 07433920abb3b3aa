/* SPDX-License-Identifier: MIT */
/* SHA-256 (FIPS 180-4), for the spool's identity of the credentials a
 * profile was meant for: a salted hash, never the secret. Not installed. */
#ifndef MP_PYRO_SHA256_H
#define MP_PYRO_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct mp_pyro_sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed */
    uint8_t buf[64];
    size_t nbuf;
} mp_pyro_sha256;

void mp_pyro_sha256_init(mp_pyro_sha256 *c);
void mp_pyro_sha256_update(mp_pyro_sha256 *c, const void *p, size_t n);
/* Writes the digest and wipes the context. */
void mp_pyro_sha256_final(mp_pyro_sha256 *c, uint8_t out[32]);

#endif
