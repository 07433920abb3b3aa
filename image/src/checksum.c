/* XXH64, written from the published algorithm (Yann Collet's xxHash
 * specification, seed 0). Reads are little-endian by definition, so the value
 * of a byte sequence is the same on every host. */
#include "checksum.h"

#include <string.h>

#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)
#define P4 UINT64_C(0x85EBCA77C2B2AE63)
#define P5 UINT64_C(0x27D4EB2F165667C5)

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t read64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t round64(uint64_t acc, uint64_t input)
{
    acc += input * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static inline uint64_t merge(uint64_t acc, uint64_t val)
{
    acc ^= round64(0, val);
    return acc * P1 + P4;
}

void img_hash_init(struct img_hash *h)
{
    h->v[0] = P1 + P2;
    h->v[1] = P2;
    h->v[2] = 0;
    h->v[3] = (uint64_t)0 - P1;
    h->total = 0;
    h->buffered = 0;
}

/* Consumes whole 32-byte stripes from p; returns the bytes consumed. */
static size_t stripes(uint64_t v[4], const unsigned char *p, size_t len)
{
    uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
    size_t done = 0;
    for (; done + 32 <= len; done += 32) {
        a = round64(a, read64(p + done));
        b = round64(b, read64(p + done + 8));
        c = round64(c, read64(p + done + 16));
        d = round64(d, read64(p + done + 24));
    }
    v[0] = a, v[1] = b, v[2] = c, v[3] = d;
    return done;
}

void img_hash_update(struct img_hash *h, const void *data, size_t len)
{
    const unsigned char *p = data;
    h->total += len;
    if (h->buffered) {
        size_t take = 32 - h->buffered;
        if (take > len)
            take = len;
        memcpy(h->buf + h->buffered, p, take);
        h->buffered += take;
        p += take;
        len -= take;
        if (h->buffered < 32)
            return;
        stripes(h->v, h->buf, 32);
        h->buffered = 0;
    }
    size_t done = stripes(h->v, p, len);
    memcpy(h->buf, p + done, len - done);
    h->buffered = len - done;
}

uint64_t img_hash_final(const struct img_hash *h)
{
    uint64_t acc;
    if (h->total >= 32) {
        acc = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++)
            acc = merge(acc, h->v[i]);
    } else {
        acc = h->v[2] + P5; /* v[2] is the seed */
    }
    acc += h->total;
    const unsigned char *p = h->buf;
    size_t len = h->buffered;
    for (; len >= 8; p += 8, len -= 8) {
        acc ^= round64(0, read64(p));
        acc = rotl(acc, 27) * P1 + P4;
    }
    if (len >= 4) {
        acc ^= (uint64_t)read32(p) * P1;
        acc = rotl(acc, 23) * P2 + P3;
        p += 4;
        len -= 4;
    }
    for (; len > 0; p++, len--) {
        acc ^= (*p) * P5;
        acc = rotl(acc, 11) * P1;
    }
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}

uint64_t img_hash(const void *data, size_t len)
{
    struct img_hash h;
    img_hash_init(&h);
    img_hash_update(&h, data, len);
    return img_hash_final(&h);
}
