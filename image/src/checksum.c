/* SPDX-License-Identifier: MIT */
/* XXH3-64, seed 0, default secret, written from the published algorithm
 * (Yann Collet's xxHash specification, version 0.8). Reads are
 * little-endian by definition, so the value of a byte sequence is the same
 * on every host.
 *
 * Inputs longer than 240 bytes go through stripes of 64 bytes, 16 to a
 * block, each stripe folded into eight accumulators by a 32x32->64-bit
 * multiply: that kernel is what the loader's throughput depends on, so it
 * comes in three versions (portable C, SSE2, AVX2) that compute the same
 * thing. */
#include "checksum.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IMG_X86 1
#include <immintrin.h>
#else
#define IMG_X86 0
#endif

#define P32_1 UINT64_C(0x9E3779B1)
#define P32_2 UINT64_C(0x85EBCA77)
#define P32_3 UINT64_C(0xC2B2AE3D)
#define P64_1 UINT64_C(0x9E3779B185EBCA87)
#define P64_2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P64_3 UINT64_C(0x165667B19E3779F9)
#define P64_4 UINT64_C(0x85EBCA77C2B2AE63)
#define P64_5 UINT64_C(0x27D4EB2F165667C5)
#define PMX_1 UINT64_C(0x165667919E3779F9)
#define PMX_2 UINT64_C(0x9FB21C651E98DF25)

#define STRIPE       64
#define BLOCK_STRIPE 16 /* (secret size - STRIPE) / 8 */
#define SECRET_SIZE  192

static const unsigned char secret[SECRET_SIZE] __attribute__((aligned(64))) = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

static inline uint64_t rd64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* The 128-bit product of a and b, its halves xored. */
static inline uint64_t mul_fold(uint64_t a, uint64_t b)
{
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 u128;
    u128 p = (u128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
#else
    uint64_t lo_lo = (a & 0xFFFFFFFFu) * (b & 0xFFFFFFFFu);
    uint64_t hi_lo = (a >> 32) * (b & 0xFFFFFFFFu);
    uint64_t lo_hi = (a & 0xFFFFFFFFu) * (b >> 32);
    uint64_t hi_hi = (a >> 32) * (b >> 32);
    uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
    uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
    uint64_t lower = (cross << 32) | (lo_lo & 0xFFFFFFFFu);
    return lower ^ upper;
#endif
}

static inline uint64_t avalanche64(uint64_t h)
{
    h ^= h >> 33;
    h *= P64_2;
    h ^= h >> 29;
    h *= P64_3;
    h ^= h >> 32;
    return h;
}

static inline uint64_t avalanche3(uint64_t h)
{
    h ^= h >> 37;
    h *= PMX_1;
    h ^= h >> 32;
    return h;
}

static inline uint64_t rrmxmx(uint64_t h, uint64_t len)
{
    h ^= rotl(h, 49) ^ rotl(h, 24);
    h *= PMX_2;
    h ^= (h >> 35) + len;
    h *= PMX_2;
    h ^= h >> 28;
    return h;
}

static inline uint64_t mix16(const unsigned char *in, const unsigned char *sec)
{
    return mul_fold(rd64(in) ^ rd64(sec), rd64(in + 8) ^ rd64(sec + 8));
}

/* ---- inputs of at most 240 bytes ------------------------------------ */

static uint64_t hash_short(const unsigned char *in, size_t len)
{
    if (len > 8) {
        if (len > 16) {
            uint64_t acc = len * P64_1;
            if (len <= 128) {
                if (len > 32) {
                    if (len > 64) {
                        if (len > 96) {
                            acc += mix16(in + 48, secret + 96);
                            acc += mix16(in + len - 64, secret + 112);
                        }
                        acc += mix16(in + 32, secret + 64);
                        acc += mix16(in + len - 48, secret + 80);
                    }
                    acc += mix16(in + 16, secret + 32);
                    acc += mix16(in + len - 32, secret + 48);
                }
                acc += mix16(in, secret);
                acc += mix16(in + len - 16, secret + 16);
                return avalanche3(acc);
            }
            /* 129..240 */
            size_t rounds = len / 16;
            for (size_t i = 0; i < 8; i++)
                acc += mix16(in + 16 * i, secret + 16 * i);
            acc = avalanche3(acc);
            for (size_t i = 8; i < rounds; i++)
                acc += mix16(in + 16 * i, secret + 16 * (i - 8) + 3);
            acc += mix16(in + len - 16, secret + 136 - 17);
            return avalanche3(acc);
        }
        uint64_t lo = rd64(in) ^ (rd64(secret + 24) ^ rd64(secret + 32));
        uint64_t hi = rd64(in + len - 8) ^ (rd64(secret + 40) ^ rd64(secret + 48));
        uint64_t acc = len + __builtin_bswap64(lo) + hi + mul_fold(lo, hi);
        return avalanche3(acc);
    }
    if (len >= 4) {
        uint64_t in1 = rd32(in), in2 = rd32(in + len - 4);
        uint64_t keyed = (in2 + (in1 << 32)) ^ (rd64(secret + 8) ^ rd64(secret + 16));
        return rrmxmx(keyed, len);
    }
    if (len > 0) {
        uint32_t c1 = in[0], c2 = in[len >> 1], c3 = in[len - 1];
        uint32_t combined = (c1 << 16) | (c2 << 24) | c3 | ((uint32_t)len << 8);
        uint64_t flip = (uint64_t)(rd32(secret) ^ rd32(secret + 4));
        return avalanche64((uint64_t)combined ^ flip);
    }
    return avalanche64(rd64(secret + 56) ^ rd64(secret + 64));
}

/* ---- the stripe kernels --------------------------------------------- */

/* Folds `n` stripes at `in` into acc, stripe k keyed at sec + 8k. */
typedef void accumulate_fn(uint64_t *acc, const unsigned char *in, const unsigned char *sec,
                           size_t n);

static void accumulate_c(uint64_t *restrict acc, const unsigned char *in, const unsigned char *sec,
                         size_t n)
{
    for (size_t s = 0; s < n; s++, in += STRIPE, sec += 8)
        for (size_t i = 0; i < 8; i++) {
            uint64_t v = rd64(in + 8 * i), k = v ^ rd64(sec + 8 * i);
            acc[i ^ 1] += v;
            acc[i] += (k & 0xFFFFFFFFu) * (k >> 32);
        }
}

static void scramble(uint64_t *acc, const unsigned char *sec)
{
    for (size_t i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= rd64(sec + 8 * i);
        acc[i] = a * P32_1;
    }
}

#if IMG_X86
static void accumulate_sse2(uint64_t *acc, const unsigned char *in, const unsigned char *sec,
                            size_t n)
{
    __m128i a[4];
    for (int i = 0; i < 4; i++)
        a[i] = _mm_loadu_si128((const __m128i *)(void *)(acc + 2 * i));
    for (size_t s = 0; s < n; s++, in += STRIPE, sec += 8)
        for (int i = 0; i < 4; i++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + 16 * i));
            __m128i k =
                _mm_xor_si128(v, _mm_loadu_si128((const __m128i *)(const void *)(sec + 16 * i)));
            __m128i prod = _mm_mul_epu32(k, _mm_shuffle_epi32(k, _MM_SHUFFLE(0, 3, 0, 1)));
            __m128i swap = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2));
            a[i] = _mm_add_epi64(prod, _mm_add_epi64(a[i], swap));
        }
    for (int i = 0; i < 4; i++)
        _mm_storeu_si128((__m128i *)(void *)(acc + 2 * i), a[i]);
}

__attribute__((target("avx2"))) static void accumulate_avx2(uint64_t *acc, const unsigned char *in,
                                                            const unsigned char *sec, size_t n)
{
    __m256i a0 = _mm256_loadu_si256((const __m256i *)(void *)acc);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(void *)(acc + 4));
    for (size_t s = 0; s < n; s++, in += STRIPE, sec += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)in);
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(in + 32));
        __m256i k0 = _mm256_xor_si256(v0, _mm256_loadu_si256((const __m256i *)(const void *)sec));
        __m256i k1 =
            _mm256_xor_si256(v1, _mm256_loadu_si256((const __m256i *)(const void *)(sec + 32)));
        __m256i p0 = _mm256_mul_epu32(k0, _mm256_shuffle_epi32(k0, _MM_SHUFFLE(0, 3, 0, 1)));
        __m256i p1 = _mm256_mul_epu32(k1, _mm256_shuffle_epi32(k1, _MM_SHUFFLE(0, 3, 0, 1)));
        a0 = _mm256_add_epi64(
            p0, _mm256_add_epi64(a0, _mm256_shuffle_epi32(v0, _MM_SHUFFLE(1, 0, 3, 2))));
        a1 = _mm256_add_epi64(
            p1, _mm256_add_epi64(a1, _mm256_shuffle_epi32(v1, _MM_SHUFFLE(1, 0, 3, 2))));
    }
    _mm256_storeu_si256((__m256i *)(void *)acc, a0);
    _mm256_storeu_si256((__m256i *)(void *)(acc + 4), a1);
}
#endif

static accumulate_fn *kernel_for(int which)
{
#if IMG_X86
    if (which == 1)
        return accumulate_c;
    if (which == 2)
        return accumulate_sse2;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? accumulate_avx2 : accumulate_sse2;
#else
    (void)which;
    return accumulate_c;
#endif
}

/* Chosen once (every choice computes the same value, so a race between
 * two first calls is harmless; the atomics keep it defined). */
static accumulate_fn *kernel_ptr;

static inline accumulate_fn *kernel(void)
{
    accumulate_fn *k = __atomic_load_n(&kernel_ptr, __ATOMIC_RELAXED);
    if (!k) {
        k = kernel_for(0);
        __atomic_store_n(&kernel_ptr, k, __ATOMIC_RELAXED);
    }
    return k;
}

int img_hash_kernel(int which)
{
    accumulate_fn *k = kernel_for(which);
    __atomic_store_n(&kernel_ptr, k, __ATOMIC_RELAXED);
#if IMG_X86
    return k == accumulate_c ? 1 : k == accumulate_sse2 ? 2 : 3;
#else
    return 1;
#endif
}

/* Consumes n stripes, scrambling at every block end. */
static void consume(uint64_t *acc, size_t *stripes, const unsigned char *in, size_t n,
                    accumulate_fn *acc_fn)
{
    while (n) {
        size_t take = BLOCK_STRIPE - *stripes;
        if (take > n)
            take = n;
        acc_fn(acc, in, secret + 8 * *stripes, take);
        in += take * STRIPE;
        n -= take;
        *stripes += take;
        if (*stripes == BLOCK_STRIPE) {
            scramble(acc, secret + SECRET_SIZE - STRIPE);
            *stripes = 0;
        }
    }
}

static uint64_t merge(const uint64_t *acc, uint64_t total)
{
    uint64_t r = total * P64_1;
    for (size_t i = 0; i < 4; i++)
        r += mul_fold(acc[2 * i] ^ rd64(secret + 11 + 16 * i),
                      acc[2 * i + 1] ^ rd64(secret + 11 + 16 * i + 8));
    return avalanche3(r);
}

static const uint64_t acc_init[8] = {P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1};

/* ---- streaming ------------------------------------------------------ */

void img_hash_init(struct img_hash *h)
{
    memcpy(h->acc, acc_init, sizeof h->acc);
    h->total = 0;
    h->stripes = 0;
    h->buffered = 0;
}

void img_hash_update(struct img_hash *h, const void *data, size_t len)
{
    const unsigned char *p = data;
    h->total += len;
    if (h->buffered + len <= sizeof h->buf) {
        if (len)
            memcpy(h->buf + h->buffered, p, len);
        h->buffered += len;
        return;
    }
    /* More than the buffer holds: consume whole stripes, always keeping at
     * least one byte back (the last stripe is the digest's). */
    accumulate_fn *k = kernel();
    if (h->buffered) {
        size_t fill = sizeof h->buf - h->buffered;
        memcpy(h->buf + h->buffered, p, fill);
        p += fill;
        len -= fill;
        consume(h->acc, &h->stripes, h->buf, sizeof h->buf / STRIPE, k);
        memcpy(h->tail, h->buf + sizeof h->buf - STRIPE, STRIPE);
        h->buffered = 0;
    }
    if (len > sizeof h->buf) {
        size_t n = (len - 1) / STRIPE; /* stripes before the last byte */
        consume(h->acc, &h->stripes, p, n, k);
        p += n * STRIPE;
        len -= n * STRIPE;
        memcpy(h->tail, p - STRIPE, STRIPE);
    }
    memcpy(h->buf, p, len);
    h->buffered = len;
}

uint64_t img_hash_final(const struct img_hash *h)
{
    if (h->total <= 240)
        return hash_short(h->buf, (size_t)h->total);
    uint64_t acc[8];
    memcpy(acc, h->acc, sizeof acc);
    size_t stripes = h->stripes;
    unsigned char last[STRIPE];
    const unsigned char *lp;
    if (h->buffered >= STRIPE) {
        consume(acc, &stripes, h->buf, (h->buffered - 1) / STRIPE, kernel());
        lp = h->buf + h->buffered - STRIPE;
    } else {
        size_t catchup = STRIPE - h->buffered;
        memcpy(last, h->tail + STRIPE - catchup, catchup);
        memcpy(last + catchup, h->buf, h->buffered);
        lp = last;
    }
    accumulate_c(acc, lp, secret + SECRET_SIZE - STRIPE - 7, 1);
    return merge(acc, h->total);
}

uint64_t img_hash(const void *data, size_t len)
{
    const unsigned char *in = data;
    if (len <= 240)
        return hash_short(in, len);
    uint64_t acc[8];
    memcpy(acc, acc_init, sizeof acc);
    size_t stripes = 0;
    consume(acc, &stripes, in, (len - 1) / STRIPE, kernel());
    accumulate_c(acc, in + len - STRIPE, secret + SECRET_SIZE - STRIPE - 7, 1);
    return merge(acc, len);
}
