/* SPDX-License-Identifier: MIT */
/* A buffered writer over a file descriptor that hashes what it writes. */
#ifndef MP_IMG_SINK_H
#define MP_IMG_SINK_H

#include "checksum.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct img_sink {
    int fd;
    unsigned char *buf;
    size_t len, cap;
    uint64_t offset;  /* bytes accepted so far */
    uint64_t flushed; /* file offset of buf[0] */
    /* The hash covers file bytes from hash_from on. */
    struct img_hash hash;
    uint64_t hash_from;
    int error; /* errno of the first failure, then every call is a no-op */
};

int img_sink_open(struct img_sink *s, int fd, uint64_t hash_from);
void img_sink_put(struct img_sink *s, const void *data, size_t len);
static inline void img_sink_word(struct img_sink *s, uint64_t w)
{
    if (s->cap - s->len >= 8) {
        memcpy(s->buf + s->len, &w, 8);
        s->len += 8;
        s->offset += 8;
        return;
    }
    img_sink_put(s, &w, 8);
}
void img_sink_zeros(struct img_sink *s, size_t n);
/* Hashes and writes out the buffer; returns 0 or the errno of the first
 * failure. */
int img_sink_flush(struct img_sink *s);
void img_sink_close(struct img_sink *s);

/* write(2) all of it, through EINTR and short writes; 0 or errno. */
int img_write_all(int fd, const void *data, size_t len);
/* pwrite(2) all of it; 0 or errno. */
int img_pwrite_all(int fd, const void *data, size_t len, uint64_t offset);

#endif /* MP_IMG_SINK_H */
