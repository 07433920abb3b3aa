/* SPDX-License-Identifier: MIT */
/* Buffers, gunzip and a protobuf wire writer for the tests, independent
 * of protobuf-c and of the library's encoders. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

void tbuf_put(tbuf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
}

void tbuf_free(tbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

bool t_gunzip(const uint8_t *in, size_t n, tbuf *out)
{
    z_stream z = {0};
    if (inflateInit2(&z, 15 + 16) != Z_OK)
        return false;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    uint8_t chunk[16384];
    int rc;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&z);
            return false;
        }
        tbuf_put(out, chunk, sizeof chunk - z.avail_out);
    } while (rc != Z_STREAM_END);
    inflateEnd(&z);
    return true;
}

static void w_varint(tbuf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        uint8_t c = v & 0x7F;
        v >>= 7;
        tmp[n++] = v ? (uint8_t)(c | 0x80) : c;
    } while (v);
    tbuf_put(b, tmp, n);
}

void pbw_varint(tbuf *b, uint32_t field, uint64_t v)
{
    w_varint(b, (uint64_t)field << 3);
    w_varint(b, v);
}

void pbw_bytes(tbuf *b, uint32_t field, const void *p, size_t n)
{
    w_varint(b, ((uint64_t)field << 3) | 2);
    w_varint(b, n);
    tbuf_put(b, p, n);
}

void pbw_str(tbuf *b, uint32_t field, const char *s) { pbw_bytes(b, field, s, strlen(s)); }

void pbw_double(tbuf *b, uint32_t field, double d)
{
    w_varint(b, ((uint64_t)field << 3) | 1);
    tbuf_put(b, &d, 8);
}

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}
