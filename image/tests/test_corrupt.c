/* Damaged images are refused, never crash and never leak: truncation at
 * every length, every byte flipped, and structural damage under a valid
 * checksum (which only the per-object checks can catch). */
#include "fixture.h"

#include "format.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fx f;
static unsigned char *img;
static size_t len;
static struct img_header hd;
static size_t objects_at, extents_at, blob_at;

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
    extents_at = sizeof hd + hd.types_size + hd.foreign_size + hd.roots_size;
    objects_at = extents_at + 8 * hd.n_objects;
    blob_at = objects_at + hd.objects_size;
    cr_assert_eq(hd.n_objects, 5);
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
        cr_assert(st == MP_IMG_ERR_NOT_IMAGE || st == MP_IMG_ERR_CORRUPT, "length %zu: %s (%s)", n,
                  mp_img_strerror(st), err.detail);
    }
    mp_img_error err;
    cr_assert_eq(load(img, 100, &err), MP_IMG_ERR_CORRUPT);
    cr_assert_str_eq(err.detail, "truncated: 100 bytes, the header alone is 208");
    cr_assert_eq(verify(img, len - 8, &err), MP_IMG_ERR_CORRUPT);
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
    cr_assert_eq(load(copy, len, &err), MP_IMG_ERR_CHECKSUM);
    cr_assert_str_eq(err.detail, "header field 'checksum' does not match the contents");
    cr_assert_eq(verify(copy, len, &err), MP_IMG_ERR_CHECKSUM);
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
    cr_assert_eq(load(copy, len, &err), MP_IMG_ERR_CORRUPT, "%s: got %s", words, err.detail);
    cr_assert(strstr(err.detail, words), "'%s' not in: %s", words, err.detail);
    cr_assert_eq(verify(copy, len, &err), MP_IMG_ERR_CORRUPT, "verify: %s", err.detail);
    free(copy);
}

/* Records: #1 node [3, 4] | #2 vec [2, 1, 5] | #3 leaf [77] | #4 str [5, off] | #5 fn [f, 0] */
#define UNIT(rec_word) (objects_at + 8 * (rec_word))

Test(corrupt, reference_out_of_range) { structural(UNIT(0), 6, "reference to object 6 of 5"); }
Test(corrupt, slot0_count_contradicts_extent) { structural(UNIT(2), 5, "slot-0 count 5"); }
Test(corrupt, bytes_offset_not_a_blob_entry)
{
    structural(UNIT(7), 4, "bytes offset 4");
    structural(UNIT(7), hd.n_bytes + 8, "is not a blob entry");
    /* the NUL after the data overwritten */
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    copy[blob_at + 8 + 5] = 'x';
    fx_fix_checksum(copy, len);
    mp_img_error err;
    cr_assert_eq(load(copy, len, &err), MP_IMG_ERR_CORRUPT, "%s", err.detail);
    free(copy);
}
Test(corrupt, foreign_index_out_of_range) { structural(UNIT(8), 9, "foreign index 9"); }
Test(corrupt, extent_type_out_of_range)
{
    structural(extents_at, IMG_EXTENT(2, 200, 0), "type index 200");
    structural(extents_at, IMG_EXTENT(3, 0, 0), "contradict the shape of type 'node'");
    structural(extents_at, IMG_EXTENT(2, 10, 0), "contradict the shape of type 'blob'");
}
Test(corrupt, bad_tables)
{
    size_t roots_at = extents_at - hd.roots_size;
    structural(roots_at, 6, "root table");           /* index past the objects */
    structural(sizeof hd + 8 + 8, 99, "type table"); /* shape class of type 0 */
    structural(extents_at - hd.roots_size - hd.foreign_size, 9, "foreign table"); /* kind */
    (void)get;
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
