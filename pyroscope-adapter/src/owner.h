/* SPDX-License-Identifier: MIT */
/* Who a spooled profile was meant for: the server, the tenant and a
 * salted SHA-256 of the credentials (never the credentials), so that only
 * an agent configured the same resends it. Not installed. */
#ifndef MP_PYRO_OWNER_H
#define MP_PYRO_OWNER_H

#include <stdint.h>

#include "config_internal.h"

#define MP_PYRO_SALT_LEN 16

/* Hex SHA-256 of `salt` and every credential of `cfg` (Basic user and
 * password, bearer token, extra header names and values, each
 * length-prefixed) in `hex` (64 characters + NUL). */
void mp_pyro_owner_digest(const mp_pyro_config *cfg, const uint8_t salt[MP_PYRO_SALT_LEN],
                          char hex[65]);

#endif
