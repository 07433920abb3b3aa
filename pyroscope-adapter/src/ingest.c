/* SPDX-License-Identifier: MIT */
/* POST /ingest: what the Go and Node clients send. Multipart with one
 * file part `profile` (filename set, else the server ignores the part and
 * answers 200 having stored nothing), gzipped pprof, no `format`
 * parameter (with `format=pprof` the multipart body would be read as raw
 * pprof and rejected). from/until in milliseconds (13 digits). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "request.h"

void mp_pyro_request_free(mp_pyro_request *req)
{
    free(req->url);
    free(req->content_type);
    mp_pyro_buf_free(&req->body);
    memset(req, 0, sizeof *req);
}

static void make_boundary(mp_pyro_rng *rng, const uint8_t *gz, size_t gz_len, char out[41])
{
    static const char hex[] = "0123456789abcdef";
    do {
        memcpy(out, "mimprof", 7);
        for (int i = 7; i < 40; i++)
            out[i] = hex[mp_pyro_rng_next(rng) & 15];
        out[40] = '\0';
    } while (memmem(gz, gz_len, out, 40) != NULL);
}

mp_pyro_status mp_pyro_ingest_request(const mp_pyro_config *cfg, const mp_pyro_series *series,
                                      const char *spy, const uint8_t *gz, size_t gz_len,
                                      int64_t from_ns, int64_t until_ns, mp_pyro_rng *rng,
                                      mp_pyro_request *req)
{
    memset(req, 0, sizeof *req);
    mp_pyro_buf url = {0}, name = {0};
    mp_pyro_series_name(series, &name);
    const char *name_str = mp_pyro_buf_cstr(&name);
    mp_pyro_buf_puts(&url, cfg->server);
    mp_pyro_buf_puts(&url, "/ingest?name=");
    if (name_str)
        mp_pyro_buf_put_query_escaped(&url, name_str);
    mp_pyro_buf_printf(&url, "&from=%" PRId64 "&until=%" PRId64 "&spyName=", from_ns / 1000000,
                       until_ns / 1000000);
    mp_pyro_buf_put_query_escaped(&url, spy);
    mp_pyro_buf_free(&name);
    req->url = mp_pyro_buf_cstr(&url);
    if (!name_str || !req->url) {
        mp_pyro_buf_free(&url);
        req->url = NULL;
        return MP_PYRO_E_NOMEM;
    }

    char boundary[41];
    make_boundary(rng, gz, gz_len, boundary);
    mp_pyro_buf *b = &req->body;
    mp_pyro_buf_printf(b, "--%s\r\n", boundary);
    mp_pyro_buf_puts(
        b, "Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n");
    mp_pyro_buf_puts(b, "Content-Type: application/octet-stream\r\n\r\n");
    mp_pyro_buf_put(b, gz, gz_len);
    mp_pyro_buf_printf(b, "\r\n--%s--\r\n", boundary);
    size_t ct_len = sizeof "multipart/form-data; boundary=" + 40;
    req->content_type = malloc(ct_len);
    if (b->oom || !req->content_type) {
        mp_pyro_request_free(req);
        return MP_PYRO_E_NOMEM;
    }
    mp_pyro_fmt(req->content_type, ct_len, "multipart/form-data; boundary=%s", boundary);
    return MP_PYRO_OK;
}
