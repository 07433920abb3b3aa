/* SPDX-License-Identifier: MIT */
/* The two ingestion requests, built as plain bytes (URL, content type,
 * body) so that tests can compare them exactly. Not installed. */
#ifndef MP_PYRO_REQUEST_H
#define MP_PYRO_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_internal.h"
#include "util.h"

typedef struct mp_pyro_request {
    char *url;          /* absolute URL with query */
    char *content_type; /* Content-Type header value */
    bool connect;       /* Connect unary call: send Connect-Protocol-Version: 1 */
    mp_pyro_buf body;
} mp_pyro_request;

void mp_pyro_request_free(mp_pyro_request *req);

/* gzip (RFC 1952) of `in`; `*out` is malloc()ed. */
mp_pyro_status mp_pyro_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len);

/* POST {server}/ingest?name=..&from=..&until=..&spyName=.. with a
 * multipart body holding one file part `profile` (the gzipped pprof). */
mp_pyro_status mp_pyro_ingest_request(const mp_pyro_config *cfg, const mp_pyro_series *series,
                                      const char *spy, const uint8_t *gz, size_t gz_len,
                                      int64_t from_ns, int64_t until_ns, mp_pyro_rng *rng,
                                      mp_pyro_request *req);

/* POST {server}/push.v1.PusherService/Push with a PushRequest of one
 * series (labels __name__, __delta__, service_name, pyroscope_spy, tags)
 * and one sample (the gzipped pprof, a random UUID as ID). */
mp_pyro_status mp_pyro_push_request(const mp_pyro_config *cfg, const mp_pyro_series *series,
                                    const char *spy, const uint8_t *gz, size_t gz_len,
                                    mp_pyro_rng *rng, mp_pyro_request *req);

#endif
