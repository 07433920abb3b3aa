/* SPDX-License-Identifier: MIT */
/* SHA-256 (src/sha256.c) and the spool's identity of credentials
 * (src/owner.c). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "owner.h"
#include "sha256.h"

static void hex(const uint8_t d[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void digest_of(const char *s, size_t n, size_t chunk, char out[65])
{
    mp_pyro_sha256 c;
    mp_pyro_sha256_init(&c);
    for (size_t i = 0; i < n; i += chunk)
        mp_pyro_sha256_update(&c, s + i, n - i < chunk ? n - i : chunk);
    uint8_t d[32];
    mp_pyro_sha256_final(&c, d);
    hex(d, out);
}

/* FIPS 180-4 examples */
Test(owner, sha256_vectors)
{
    char h[65];
    digest_of("abc", 3, 3, h);
    cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    digest_of("", 0, 1, h);
    cr_expect_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t chunk = 1; chunk <= 64; chunk += 7) {
        digest_of(m, strlen(m), chunk, h);
        cr_expect_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }
}

Test(owner, digest_depends_on_every_credential_and_the_salt)
{
    mp_pyro_config *a, *b;
    cr_assert_eq(mp_pyro_config_new(&a), MP_PYRO_OK);
    cr_assert_eq(mp_pyro_config_new(&b), MP_PYRO_OK);
    const uint8_t salt[MP_PYRO_SALT_LEN] = {1, 2, 3};
    const uint8_t salt2[MP_PYRO_SALT_LEN] = {1, 2, 4};
    char da[65], db[65];
    mp_pyro_config_set_basic_auth(a, "123", "token-a");
    mp_pyro_config_set_basic_auth(b, "123", "token-a");
    mp_pyro_owner_digest(a, salt, da);
    mp_pyro_owner_digest(b, salt, db);
    cr_expect_str_eq(da, db);
    cr_expect_null(strstr(da, "token"));
    mp_pyro_owner_digest(b, salt2, db);
    cr_expect_str_neq(da, db, "salted");
    mp_pyro_config_set_basic_auth(b, "123", "token-b");
    mp_pyro_owner_digest(b, salt, db);
    cr_expect_str_neq(da, db);
    mp_pyro_config_set_basic_auth(b, "12", "3token-a"); /* bytes moved between fields */
    mp_pyro_owner_digest(b, salt, db);
    cr_expect_str_neq(da, db);
    mp_pyro_config_set_basic_auth(b, "123", "token-a");
    mp_pyro_config_add_header(b, "X-Api-Key", "k");
    mp_pyro_owner_digest(b, salt, db);
    cr_expect_str_neq(da, db);
    mp_pyro_config_free(a);
    mp_pyro_config_free(b);
}
