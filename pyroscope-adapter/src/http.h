/* SPDX-License-Identifier: MIT */
/* One HTTP client per agent (libcurl multi + one reused easy handle, so
 * connections are kept alive and a transfer can be abandoned at a
 * deadline). Not installed. */
#ifndef MP_PYRO_HTTP_H
#define MP_PYRO_HTTP_H

#include <stdatomic.h>
#include <stdint.h>

#include "config_internal.h"
#include "request.h"

typedef struct mp_pyro_http mp_pyro_http;

typedef struct mp_pyro_http_result {
    mp_pyro_status status; /* MP_PYRO_OK on 2xx */
    long http_code;        /* 0 when no response arrived */
    int curl_code;         /* CURLcode of the transfer */
    char message[MP_PYRO_ERRLEN];
} mp_pyro_http_result;

mp_pyro_status mp_pyro_http_new(mp_pyro_http **out);
void mp_pyro_http_free(mp_pyro_http *h);
/* Makes a send in progress re-check its deadline now (any thread). */
void mp_pyro_http_wakeup(mp_pyro_http *h);

/* Sends `req` with the auth, tenant and extra headers of `cfg`, never
 * following redirects. `abort_at` (may be NULL) holds a CLOCK_MONOTONIC
 * deadline in ns, 0 for none, read while the transfer runs. */
void mp_pyro_http_send(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_request *req,
                       const _Atomic int64_t *abort_at, mp_pyro_http_result *res);

#endif
