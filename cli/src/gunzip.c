/* SPDX-License-Identifier: MIT */
/* Bounded gzip inflation with zlib (gunzip.h). */
#include "gunzip.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "fail.h"

int mpt_gunzip(const uint8_t *data, size_t len, size_t max, uint8_t **out, size_t *outlen,
               char *err, size_t errlen)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
        return mpt_fail(err, errlen, "cannot initialise zlib");
    size_t cap = len < 4096 ? 16384 : (len * 4 < max ? len * 4 : max), used = 0;
    if (cap == 0)
        cap = 1;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) {
        inflateEnd(&zs);
        return mpt_fail(err, errlen, "out of memory");
    }
    size_t in_off = 0;
    int rc = -1;
    for (;;) {
        if (zs.avail_in == 0 && in_off < len) {
            size_t chunk = len - in_off;
            if (chunk > (1u << 30))
                chunk = 1u << 30;
            zs.next_in = (Bytef *)(uintptr_t)(data + in_off);
            zs.avail_in = (uInt)chunk;
            in_off += chunk;
        }
        if (used == cap) {
            if (cap >= max) {
                mpt_fail(err, errlen, "decompressed size exceeds the limit of %zu bytes", max);
                break;
            }
            size_t ncap = cap * 2 < max ? cap * 2 : max;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                mpt_fail(err, errlen, "out of memory");
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t room = cap - used;
        if (room > (1u << 30))
            room = 1u << 30;
        zs.next_out = buf + used;
        zs.avail_out = (uInt)room;
        int z = inflate(&zs, Z_NO_FLUSH);
        used += room - zs.avail_out;
        if (z == Z_STREAM_END) {
            /* Another member may follow (concatenated gzip). */
            if (zs.avail_in == 0 && in_off == len) {
                rc = 0;
                break;
            }
            if (zs.avail_in > 0 && zs.next_in[0] != 0x1f) {
                rc = 0; /* trailing garbage after a complete member: ignored, as gzip -d does */
                break;
            }
            if (inflateReset(&zs) != Z_OK) {
                mpt_fail(err, errlen, "cannot reset zlib");
                break;
            }
            continue;
        }
        if (z == Z_BUF_ERROR && zs.avail_in == 0 && in_off == len) {
            mpt_fail(err, errlen, "truncated gzip data");
            break;
        }
        if (z != Z_OK && z != Z_BUF_ERROR) {
            mpt_fail(err, errlen, "corrupt gzip data (%s)", zs.msg != NULL ? zs.msg : "zlib error");
            break;
        }
    }
    inflateEnd(&zs);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = used;
    return 0;
}
