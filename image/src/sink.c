/* SPDX-License-Identifier: MIT */
/* The writer's output: one buffer, drained by write(2) calls in file order,
 * hashing every byte as it is written out (see hash_span). */
#define _GNU_SOURCE
#include "sink.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SINK_CAP ((size_t)1 << 20)

/* All of data out, retrying short and interrupted writes: at the file
 * offset `offset` (pwrite) when `at` is set, else at the current one. */
static int put_all(int fd, const void *data, size_t len, bool at, uint64_t offset)
{
    const unsigned char *p = data;
    while (len) {
        ssize_t n = at ? pwrite(fd, p, len, (off_t)offset) : write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

int img_write_all(int fd, const void *data, size_t len) { return put_all(fd, data, len, false, 0); }

int img_pwrite_all(int fd, const void *data, size_t len, uint64_t offset)
{
    return put_all(fd, data, len, true, offset);
}

int img_sink_open(struct img_sink *s, int fd, uint64_t hash_from)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->buf = malloc(SINK_CAP);
    if (!s->buf)
        return ENOMEM;
    s->cap = SINK_CAP;
    img_hash_init(&s->hash);
    s->hash_from = hash_from;
    return 0;
}

/* Feeds file bytes [at, at + len) to the hash, from hash_from on. */
static void hash_span(struct img_sink *s, const unsigned char *p, size_t len, uint64_t at)
{
    if (at + len <= s->hash_from)
        return;
    if (at < s->hash_from) {
        p += s->hash_from - at;
        len -= (size_t)(s->hash_from - at);
    }
    img_hash_update(&s->hash, p, len);
}

int img_sink_flush(struct img_sink *s)
{
    if (!s->error && s->len) {
        hash_span(s, s->buf, s->len, s->flushed);
        s->error = img_write_all(s->fd, s->buf, s->len);
    }
    s->flushed += s->len;
    s->len = 0;
    return s->error;
}

void img_sink_put(struct img_sink *s, const void *data, size_t len)
{
    if (s->error)
        return;
    s->offset += len;
    const unsigned char *p = data;
    while (len) {
        if (s->len == s->cap && img_sink_flush(s))
            return;
        size_t take = s->cap - s->len < len ? s->cap - s->len : len;
        memcpy(s->buf + s->len, p, take);
        s->len += take;
        p += take;
        len -= take;
    }
}

void img_sink_zeros(struct img_sink *s, size_t n)
{
    static const unsigned char zero[64];
    while (n) {
        size_t take = n < sizeof zero ? n : sizeof zero;
        img_sink_put(s, zero, take);
        n -= take;
    }
}

void img_sink_close(struct img_sink *s)
{
    free(s->buf);
    s->buf = NULL;
}
