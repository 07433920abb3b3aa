/* SPDX-License-Identifier: MIT */
/* Damaged images are refused, never crash and never leak: truncation at
 * every length, every byte flipped, and structural damage under a valid
 * checksum (which only the per-object checks can catch). */
#include "fixture.h"

#include "format.h"
#include "internal.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fx f;
static unsigned char *img;
static size_t len;
static struct img_header hd;
static size_t objects_at, roots_at, blob_at;

static void setup(void)
{
    fx_init(&f, 0);
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    /* a = node#1 [leaf#3, str#4]; b = vec#2 [2, node#1, fn#5]; fn = [stderr, nil] */
    mp_img_word *node = mp_img_alloc(h, f.node, 2), *vec = mp_img_alloc(h, f.vec, 3);
    mp_img_word *leaf = mp_img_alloc(h, f.leaf, 1), *str = mp_img_alloc(h, f.str, 2);
    mp_img_word *fn = mp_img_alloc(h, f.fn, 2);
    leaf[0] = 77;
    str[0] = 5;
    str[1] = (mp_img_word) "hello";
    fn[0] = (mp_img_word)stderr;
    node[0] = (mp_img_word)leaf;
    node[1] = (mp_img_word)str;
    vec[1] = (mp_img_word)node;
    vec[2] = (mp_img_word)fn;
    mp_img_root_set(h, "a", node, NULL);
    mp_img_root_set(h, "b", vec, NULL);
    char *path = fx_path("corrupt-base.mpimg");
    cr_assert_eq(mp_img_write(h, path, NULL), MP_IMG_OK);
    img = fx_read(path, &len);
    free(path);
    mp_img_heap_free(h);
    memcpy(&hd, img, sizeof hd);
    roots_at = sizeof hd + hd.types_size + hd.foreign_size;
    objects_at = roots_at + hd.roots_size;
    blob_at = objects_at + hd.objects_size + hd.shapes_size;
    cr_assert_eq(hd.n_objects, 5);
    cr_assert_eq(hd.objects_size, 15 * 8);
}

static void teardown(void)
{
    free(img);
    fx_free(&f);
}

TestSuite(corrupt, .init = setup, .fini = teardown);

static mp_img_status load(const unsigned char *p, size_t n, mp_img_error *err)
{
    mp_img_heap *out = NULL;
    mp_img_status st = mp_img_load_memory(f.reg, p, n, &out, err);
    if (st == MP_IMG_OK)
        mp_img_heap_free(out);
    else
        cr_assert_null(out);
    return st;
}

static mp_img_status verify(const unsigned char *p, size_t n, mp_img_error *err)
{
    char *path = fx_path("corrupt-verify.mpimg");
    cr_assert_eq(fx_write(path, p, n), 0);
    mp_img_status st = mp_img_verify(path, err);
    free(path);
    return st;
}

Test(corrupt, truncated_at_every_length)
{
    for (size_t n = 0; n < len; n++) {
        mp_img_error err;
        mp_img_status st = load(img, n, &err);
        cr_assert(st == MP_IMG_E_NOT_IMAGE || st == MP_IMG_E_CORRUPT, "length %zu: %s (%s)", n,
                  mp_img_strerror(st), err.detail);
    }
    mp_img_error err;
    cr_assert_eq(load(img, 100, &err), MP_IMG_E_CORRUPT);
    cr_assert_str_eq(err.detail, "truncated: 100 bytes, the header alone is 208");
    cr_assert_eq(verify(img, len - 8, &err), MP_IMG_E_CORRUPT);
}

Test(corrupt, every_byte_flipped)
{
    unsigned char *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(copy, img, len);
            copy[i] ^= (unsigned char)(1u << bit);
            mp_img_error err;
            cr_assert_neq(load(copy, len, &err), MP_IMG_OK, "byte %zu bit %d accepted", i, bit);
        }
    }
    free(copy);
}

Test(corrupt, wrong_checksum)
{
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    copy[len - 1] ^= 0x40; /* the last byte of the blob */
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_E_CHECKSUM);
    cr_assert_str_eq(err.detail, "header field 'checksum' does not match the contents");
    cr_assert_eq(verify(copy, len, &err), MP_IMG_E_CHECKSUM);
    free(copy);
}

static void put(unsigned char *p, size_t at, uint64_t w) { memcpy(p + at, &w, 8); }
static uint64_t get(const unsigned char *p, size_t at)
{
    uint64_t w;
    memcpy(&w, p + at, 8);
    return w;
}

/* Damages a copy at `at` (word), re-checksums it and expects CORRUPT with
 * `words` in the detail, from both load and verify. */
static void structural(size_t at, uint64_t value, const char *words)
{
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    put(copy, at, value);
    fx_fix_checksum(copy, len);
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_E_CORRUPT, "%s: got %s", words, err.detail);
    cr_assert(strstr(err.detail, words), "'%s' not in: %s", words, err.detail);
    cr_assert_eq(verify(copy, len, &err), MP_IMG_E_CORRUPT, "verify: %s", err.detail);
    free(copy);
}

/* The region, type by type, in words: node hdr 0 [4, 10] | leaf hdr 3 [77] |
 * vec hdr 5 [2, 1, 13] | str hdr 9 [5, off] | fn hdr 12 [f, 0] */
#define UNIT(word) (objects_at + 8 * (word))

static uint64_t header_word(uint32_t units, uint16_t type, uint16_t flags)
{
    struct img_obj o = {units, type, flags};
    uint64_t w;
    memcpy(&w, &o, 8);
    return w;
}

Test(corrupt, reference_out_of_range)
{
    structural(UNIT(1), 15, "reference to word 15 of a 15-word region");
    structural(UNIT(1), 2,
               "object 1 unit 0: reference to word 2 of the region, which is not an "
               "object");
    structural(UNIT(7), 12, "object 3 unit 1: reference to word 12 of the region, which is not");
}
Test(corrupt, slot0_count_contradicts_extent) { structural(UNIT(6), 5, "slot-0 count 5"); }
Test(corrupt, bytes_offset_not_a_blob_entry)
{
    structural(UNIT(11), 4, "bytes offset 4");
    structural(UNIT(11), hd.n_bytes + 8, "is not a blob entry");
    /* the NUL after the data overwritten */
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    copy[blob_at + 8 + 5] = 'x';
    fx_fix_checksum(copy, len);
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_E_CORRUPT, "%s", err.detail);
    free(copy);
}
Test(corrupt, foreign_index_out_of_range) { structural(UNIT(13), 9, "foreign index 9"); }
Test(corrupt, header_word)
{
    cr_assert_eq(get(img, UNIT(0)), header_word(2, 0, 0));
    structural(UNIT(0), header_word(2, 200, 0), "type index 200");
    structural(UNIT(0), header_word(3, 0, 0), "contradict the shape of type 'node'");
    structural(UNIT(0), header_word(2, 10, 0), "contradict the shape of type 'blob'");
    /* The flag bit that is not a user flag marks a run: of a fixed shape,
     * with a count that fits. */
    structural(UNIT(5), header_word(3, 2, IMG_RUN),
               "a run of type 'vec', which has no fixed shape");
    structural(UNIT(3), header_word(1, 1, IMG_RUN), "a run of 77 objects of 1 units does not fit");
    structural(UNIT(5), header_word(10, 2, 0), "its 10 units overrun the region");
    structural(UNIT(12), header_word(0, 1, 0), "contradict the shape of type 'leaf'");
}
Test(corrupt, region_and_header_disagree)
{
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    struct img_header h2 = hd;
    h2.n_objects = 4;
    memcpy(copy, &h2, sizeof h2);
    fx_fix_checksum(copy, len);
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_E_CORRUPT, "%s", err.detail);
    cr_assert_str_eq(err.detail, "the region holds 5 objects, the header declares 4");
    free(copy);
}
Test(corrupt, damage_is_reported_as_damage)
{
    /* A structural fault under a stale checksum: the checksum refusal. */
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    put(copy, UNIT(1), 99);
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_E_CHECKSUM, "%s", err.detail);
    cr_assert_eq(verify(copy, len, &err), MP_IMG_E_CHECKSUM, "%s", err.detail);
    free(copy);
}
Test(corrupt, bad_tables)
{
    structural(roots_at, 5, "root table: entry 0 names word 5, which is not an object");
    structural(roots_at, 99, "root table");
    structural(sizeof hd + 8 + 8, 99, "type table");            /* shape class of type 0 */
    structural(roots_at - hd.foreign_size, 9, "foreign table"); /* kind */
}

Test(corrupt, random_damage_never_crashes)
{
    unsigned char *copy = malloc(len);
    uint64_t x = 0x9E3779B97F4A7C15u;
    int accepted = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, img, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x % len) & ~(size_t)7;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            put(copy, at, (x & 1) ? x % 16 : x);
        }
        fx_fix_checksum(copy, len);
        mp_img_error err;
        accepted += load(copy, len, &err) == MP_IMG_OK;
    }
    cr_log_info("%d of 3000 damaged images still loaded (word units may hold anything)", accepted);
    free(copy);
}

/* A list of three nodes is one run: [node header | IMG_RUN] [3] then the
 * units of each node, packed (node units are all references: 32 bits
 * each); damage to the run is refused like damage to a header word, by
 * load and verify alike. */
Test(corrupt, runs)
{
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_root_set(h, "list", fx_list(h, &f, 3), NULL);
    char *path = fx_path("corrupt-run.mpimg");
    cr_assert_eq(mp_img_write(h, path, NULL), MP_IMG_OK);
    mp_img_heap_free(h);
    size_t rlen;
    unsigned char *run = fx_read(path, &rlen);
    free(path);
    struct img_header rh;
    memcpy(&rh, run, sizeof rh);
    size_t at = sizeof rh + rh.types_size + rh.foreign_size + rh.roots_size;
    cr_assert_eq(rh.objects_size, 5 * 8, "header, count, 3 x 2 units of 32 bits");
    cr_assert_eq(rh.region_words, 9, "3 x (header + 2 units)");
    cr_assert_eq(get(run, at), header_word(2, 0, IMG_RUN));
    cr_assert_eq(get(run, at + 8), 3);
    mp_img_error err;
    cr_assert_eq(load(run, rlen, &err), MP_IMG_OK, "%s", err.detail);
    static const struct {
        size_t word;
        uint64_t value;
        const char *words;
    } cases[] = {
        {1, 4, "a run of 4 objects of 2 units does not fit"},
        {1, 1, "a run of 1 objects"},
        {1, 0, "a run of 0 objects"},
        {0, 0, "units contradict the shape of type 'node'"}, /* header word 0: no run */
        {2, 5, "object 1 unit 0: reference to word 5 of the region, which is not an object"},
        {2, (uint64_t)100 << 32 | 100, "object 1 unit 0: reference to word 100 of a 9-word region"},
    };
    unsigned char *copy = malloc(rlen);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(copy, run, rlen);
        put(copy, at + 8 * cases[c].word, cases[c].value);
        fx_fix_checksum(copy, rlen);
        cr_assert_neq(load(copy, rlen, &err), MP_IMG_OK, "case %zu", c);
        cr_assert(strstr(err.detail, cases[c].words), "'%s' not in: %s", cases[c].words,
                  err.detail);
        cr_assert_neq(verify(copy, rlen, &err), MP_IMG_OK, "case %zu: verify", c);
    }
    free(copy);
    free(run);
}
