/* The writer's output: one buffer, drained by write(2) calls in file order,
 * hashing every byte as it is written out (see hash_span). */
#define _GNU_SOURCE
#include "sink.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SINK_CAP ((size_t)1 << 20)

int img_write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int img_pwrite_all(int fd, const void *data, size_t len, uint64_t offset)
{
    const unsigned char *p = data;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)offset);
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

int img_sink_open(struct img_sink *s, int fd, uint64_t hash_from, uint64_t zero_from,
                  uint64_t zero_to)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->buf = malloc(SINK_CAP);
    if (!s->buf)
        return ENOMEM;
    s->cap = SINK_CAP;
    img_hash_init(&s->hash);
    s->hash_from = hash_from;
    s->zero_from = zero_from;
    s->zero_to = zero_to;
    return 0;
}

/* Feeds file bytes [at, at + len) to the hash per hash_from / zero range. */
static void hash_span(struct img_sink *s, const unsigned char *p, size_t len, uint64_t at)
{
    static const unsigned char zero[16];
    while (len) {
        uint64_t end = at + len, stop = end;
        if (at < s->hash_from) {
            stop = end < s->hash_from ? end : s->hash_from; /* not hashed */
        } else if (at >= s->zero_from && at < s->zero_to) {
            stop = end < s->zero_to ? end : s->zero_to;
            for (uint64_t z = at; z < stop; z += sizeof zero)
                img_hash_update(&s->hash, zero,
                                stop - z < sizeof zero ? (size_t)(stop - z) : sizeof zero);
        } else {
            if (at < s->zero_from && end > s->zero_from)
                stop = s->zero_from;
            img_hash_update(&s->hash, p, (size_t)(stop - at));
        }
        p += stop - at;
        len -= (size_t)(stop - at);
        at = stop;
    }
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
