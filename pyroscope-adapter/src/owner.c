/* SPDX-License-Identifier: MIT */
/* The credentials' identity of a spooled profile (see owner.h). */
#define _GNU_SOURCE
#include "owner.h"

#include <string.h>

#include "sha256.h"

/* Length-prefixed so that no two different credential sets hash alike
 * by moving bytes between fields; NULL and "" differ. */
static void put(mp_pyro_sha256 *c, const char *s)
{
    uint64_t n = s ? strlen(s) + 1 : 0;
    mp_pyro_sha256_update(c, &n, sizeof n);
    if (s)
        mp_pyro_sha256_update(c, s, n - 1);
}

void mp_pyro_owner_digest(const mp_pyro_config *cfg, const uint8_t salt[MP_PYRO_SALT_LEN],
                          char hex[65])
{
    mp_pyro_sha256 c;
    mp_pyro_sha256_init(&c);
    mp_pyro_sha256_update(&c, "mimprof-pyroscope-spool-owner-1", 31);
    mp_pyro_sha256_update(&c, salt, MP_PYRO_SALT_LEN);
    put(&c, cfg->basic_user);
    put(&c, cfg->basic_user ? cfg->basic_password : NULL);
    put(&c, cfg->bearer);
    for (size_t i = 0; i < cfg->nheaders; i++) {
        put(&c, cfg->headers[i].name);
        put(&c, cfg->headers[i].value);
    }
    uint8_t d[32];
    mp_pyro_sha256_final(&c, d);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
    explicit_bzero(d, sizeof d);
}
