/* SPDX-License-Identifier: MIT */
/* gzip compression of profiles (zlib, gzip wrapper). */
#include <stdlib.h>
#include <zlib.h>

#include "request.h"

mp_pyro_status mp_pyro_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    z_stream z = {0};
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return MP_PYRO_E_NOMEM;
    uLong bound = deflateBound(&z, (uLong)n) + 32;
    uint8_t *buf = malloc(bound);
    if (!buf) {
        deflateEnd(&z);
        return MP_PYRO_E_NOMEM;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)bound;
    int rc = deflate(&z, Z_FINISH);
    size_t produced = bound - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return MP_PYRO_E_INTERNAL;
    }
    *out = buf;
    *out_len = produced;
    return MP_PYRO_OK;
}
