/* SPDX-License-Identifier: MIT */
/* Determinism: the same graph gives byte-identical files, whatever the
 * allocation order, the addresses, or the order roots were named in. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fx f;

static void setup(void) { fx_init(&f, 1); }
static void teardown(void) { fx_free(&f); }
TestSuite(determinism, .init = setup, .fini = teardown);

/* A graph with sharing, a cycle, strings, vectors and foreign values: n
 * records, each [node -> (leaf i, str), ...]. `reverse` allocates every
 * object in the opposite order and interleaves garbage. */
static mp_img_heap *build(int n, int reverse, int roots_backwards)
{
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_word **leaves = calloc((size_t)n, sizeof *leaves);
    mp_img_word **strs = calloc((size_t)n, sizeof *strs);
    static char text[64][16];
    for (int k = 0; k < n; k++) {
        int i = reverse ? n - 1 - k : k;
        if (reverse)
            mp_img_alloc(h, f.node, 2); /* garbage between live objects */
        strs[i] = mp_img_alloc(h, f.str, 2);
        snprintf(text[i % 64], sizeof text[0], "s%d", i % 64);
        strs[i][0] = strlen(text[i % 64]);
        strs[i][1] = (mp_img_word)text[i % 64];
        leaves[i] = mp_img_alloc(h, f.leaf, 1);
        leaves[i][0] = (mp_img_word)i * 3;
        mp_img_meta(h, leaves[i])[0] = (mp_img_word)i;
        mp_img_set_flags(leaves[i], (unsigned)i & 0xFF);
    }
    mp_img_word *v = mp_img_alloc(h, f.vec, (size_t)n + 1);
    for (int i = 0; i < n; i++) {
        mp_img_word *pair = mp_img_alloc(h, f.node, 2);
        pair[0] = (mp_img_word)leaves[i];
        pair[1] = (mp_img_word)strs[i / 2]; /* shared strings */
        v[i + 1] = (mp_img_word)pair;
    }
    mp_img_word *loop = mp_img_alloc(h, f.node, 2);
    loop[0] = (mp_img_word)v;
    loop[1] = (mp_img_word)loop;
    mp_img_word *fn = mp_img_alloc(h, f.fn, 2);
    fn[0] = (mp_img_word)(uintptr_t)&abs;
    fn[1] = (mp_img_word)loop;
    mp_img_word *hd = mp_img_alloc(h, f.handle, 1);
    hd[0] = 9;
    const char *names[3] = {"a-vector", "b-loop", "c-foreign"};
    void *vals[3] = {v, loop, fn};
    for (int r = 0; r < 3; r++) {
        int i = roots_backwards ? 2 - r : r;
        mp_img_root_set(h, names[i], vals[i], NULL);
    }
    mp_img_root_set(h, "d-handle", hd, NULL);
    free(leaves);
    free(strs);
    return h;
}

static unsigned char *image_of(mp_img_heap *h, const char *name, size_t *len)
{
    char *path = fx_path(name);
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, path, &err), MP_IMG_OK, "%s", err.detail);
    unsigned char *img = fx_read(path, len);
    cr_assert_not_null(img);
    free(path);
    return img;
}

Test(determinism, same_graph_same_bytes)
{
    mp_img_heap *h = build(500, 0, 0);
    size_t la, lb;
    unsigned char *a = image_of(h, "d1.mpimg", &la), *b = image_of(h, "d2.mpimg", &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0);
    free(a);
    free(b);
    mp_img_heap_free(h);
}

Test(determinism, allocation_order_does_not_matter)
{
    mp_img_heap *h1 = build(500, 0, 0), *h2 = build(500, 1, 1);
    size_t la, lb;
    unsigned char *a = image_of(h1, "o1.mpimg", &la), *b = image_of(h2, "o2.mpimg", &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0, "different allocation order, different bytes");
    free(a);
    free(b);
    mp_img_heap_free(h1);
    mp_img_heap_free(h2);
}

Test(determinism, a_loaded_heap_writes_the_same_bytes)
{
    mp_img_heap *h = build(200, 0, 0);
    size_t la, lb;
    unsigned char *a = image_of(h, "l1.mpimg", &la);
    char *path = fx_path("l1.mpimg");
    mp_img_heap *back;
    cr_assert_eq(mp_img_load(f.reg, path, &back, NULL), MP_IMG_OK);
    unsigned char *b = image_of(back, "l2.mpimg", &lb);
    cr_assert_eq(la, lb);
    cr_assert_eq(memcmp(a, b, la), 0);
    free(path);
    free(a);
    free(b);
    mp_img_heap_free(back);
    mp_img_heap_free(h);
}
