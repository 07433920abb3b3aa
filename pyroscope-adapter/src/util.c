/* SPDX-License-Identifier: MIT */
/* Small shared helpers: clocks, strings, byte buffers, RNG, base64. */
#define _GNU_SOURCE
#include "util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int64_t mp_pyro_now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mp_pyro_now_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

char *mp_pyro_strdup(const char *s) { return s ? strdup(s) : NULL; }

void mp_pyro_free_secret(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

void mp_pyro_fmt(char *buf, size_t len, const char *fmt, ...)
{
    if (!buf || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static int buf_reserve(mp_pyro_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void mp_pyro_buf_put(mp_pyro_buf *b, const void *p, size_t n)
{
    if (n == 0 || buf_reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void mp_pyro_buf_puts(mp_pyro_buf *b, const char *s) { mp_pyro_buf_put(b, s, strlen(s)); }

void mp_pyro_buf_printf(mp_pyro_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *mp_pyro_buf_cstr(mp_pyro_buf *b)
{
    if (buf_reserve(b, 0) != 0)
        return NULL;
    b->data[b->len] = '\0';
    return (char *)b->data;
}

void mp_pyro_buf_free(mp_pyro_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

int mp_pyro_read_file(const char *path, uint8_t **out, size_t *len)
{
    /* A regular file only, opened without following a final symbolic
     * link and without blocking (a FIFO in its place would hang the
     * reading thread). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        fd = -1;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    mp_pyro_buf b = {0};
    uint8_t chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        mp_pyro_buf_put(&b, chunk, n);
    int bad = ferror(f) || b.oom;
    fclose(f);
    if (bad) {
        mp_pyro_buf_free(&b);
        return -1;
    }
    *out = b.data;
    *len = b.len;
    return 0;
}

void mp_pyro_buf_put_query_escaped(mp_pyro_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            mp_pyro_buf_put(b, &c, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            mp_pyro_buf_put(b, e, 3);
        }
    }
}

void mp_pyro_buf_put_base64(mp_pyro_buf *b, const uint8_t *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char o[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
                     i + 2 < n ? tab[v & 63] : '='};
        mp_pyro_buf_put(b, o, 4);
    }
}

void mp_pyro_rng_seed(mp_pyro_rng *r)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
        s = (uint64_t)mp_pyro_now_mono_ns() ^ ((uint64_t)getpid() << 32);
    r->s = s ? s : 0x9E3779B97F4A7C15u;
}

uint64_t mp_pyro_rng_next(mp_pyro_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Du;
}

void mp_pyro_uuid4(mp_pyro_rng *r, char out[37])
{
    uint8_t u[16];
    uint64_t a = mp_pyro_rng_next(r), c = mp_pyro_rng_next(r);
    memcpy(u, &a, 8);
    memcpy(u + 8, &c, 8);
    u[6] = (uint8_t)((u[6] & 0x0F) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}
