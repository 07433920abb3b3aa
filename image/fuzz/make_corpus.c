/* SPDX-License-Identifier: MIT */
/* fuzz-make-corpus DIR: writes the loader's seed corpus, small valid images
 * of the fixture types and crafted broken ones, as DIR/<name>.mpimg. The
 * committed corpus (fuzz/corpus/loader) was made with it:
 *   build-fuzz/fuzz/fuzz-make-corpus image/fuzz/corpus/loader */
#define _GNU_SOURCE
#include "fixture.h"

#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static struct fx f;

static char *path(const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s.mpimg", dir, name) < 0)
        abort();
    return p;
}

static void write_heap(mp_img_heap *h, const char *name)
{
    char *p = path(name);
    mp_img_error err;
    if (mp_img_write(h, p, &err) != MP_IMG_OK) {
        fprintf(stderr, "%s: %s\n", name, err.detail);
        exit(1);
    }
    free(p);
}

/* A variant of image `base`: `mutate` applied, checksum remade if `fix`. */
static void variant(const char *base, const char *name, void (*mutate)(unsigned char *, size_t),
                    size_t keep, int fix)
{
    char *src = path(base), *dst = path(name);
    size_t len;
    unsigned char *img = fx_read(src, &len);
    if (!img)
        exit(1);
    if (keep && keep < len)
        len = keep;
    if (mutate)
        mutate(img, len);
    if (fix)
        fx_fix_checksum(img, len);
    if (fx_write(dst, img, len))
        exit(1);
    free(img);
    free(src);
    free(dst);
}

static struct img_header *hd(unsigned char *p) { return (struct img_header *)p; }
static size_t objects_at(unsigned char *p)
{
    return sizeof(struct img_header) + hd(p)->types_size + hd(p)->foreign_size + hd(p)->roots_size;
}
/* Unit 1 of object 1 (the vector: header word, slot-0 count, then refs)
 * names a word past the region. */
static void m_ref(unsigned char *p, size_t n)
{
    (void)n;
    uint64_t bad = hd(p)->objects_size / 8 + 5;
    memcpy(p + objects_at(p) + 16, &bad, 8);
}
/* The list is one run of nodes: header word with the run mark, count;
 * the count made larger than the region holds. */
static void m_run(unsigned char *p, size_t n)
{
    (void)n;
    uint64_t bad = 1000;
    memcpy(p + objects_at(p) + 8, &bad, 8);
}
static void m_flip(unsigned char *p, size_t n) { p[n / 2] ^= 0x20; }
static void m_arch(unsigned char *p, size_t n)
{
    (void)n;
    memcpy(hd(p)->arch, "vax\0\0\0", 6);
}
static void m_swap(unsigned char *p, size_t n)
{
    (void)n;
    hd(p)->byte_order = IMG_BYTE_ORDER_SWAPPED;
}
static void m_incomplete(unsigned char *p, size_t n)
{
    (void)n;
    hd(p)->incomplete = IMG_INCOMPLETE;
}
static void m_objects(unsigned char *p, size_t n)
{
    (void)n;
    hd(p)->n_objects += 1;
}
static void m_magic(unsigned char *p, size_t n)
{
    (void)n;
    p[0] = 'X';
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: fuzz-make-corpus DIR\n", stderr);
        return 2;
    }
    dir = argv[1];
    fx_init(&f, 0);

    /* Every kind and every foreign vocabulary word. */
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_word *v = mp_img_alloc(h, f.vec, 10);
    mp_img_word *n = mp_img_alloc(h, f.node, 2), *l = mp_img_alloc(h, f.leaf, 1);
    l[0] = 42;
    n[0] = (mp_img_word)l;
    n[1] = (mp_img_word)n;
    mp_img_word *s = mp_img_alloc(h, f.str, 2);
    s[0] = 4;
    s[1] = (mp_img_word) "a\0bc";
    mp_img_word *c = mp_img_alloc(h, f.cstr, 1);
    c[0] = (mp_img_word) "text";
    mp_img_word *fn = mp_img_alloc(h, f.fn, 2);
    fn[0] = (mp_img_word)stdout;
    mp_img_word *fs = mp_img_alloc(h, f.fn, 2);
    fs[0] = (mp_img_word)(uintptr_t)&abs;
    mp_img_word *code = mp_img_alloc(h, f.code, 2);
    code[0] = (mp_img_word)(uintptr_t)&main + 4;
    mp_img_word *hh = mp_img_alloc(h, f.handle, 1);
    hh[0] = 7;
    mp_img_word *t = mp_img_alloc(h, f.temp, 2);
    t[1] = (mp_img_word)&t;
    mp_img_word *var = mp_img_alloc(h, f.var, 3);
    var[0] = 1;
    var[1] = (mp_img_word)v;
    mp_img_word *all[] = {n, s, c, fn, fs, code, hh, t, var};
    for (int i = 0; i < 9; i++)
        v[i + 1] = (mp_img_word)all[i];
    mp_img_set_flags(n, 0x4001);
    mp_img_root_set(h, "all", v, NULL);
    mp_img_root_set(h, "nil", NULL, NULL);
    write_heap(h, "all-kinds");
    mp_img_heap_free(h);

    /* Empty, a nil root, a list. */
    mp_img_heap_new(f.reg, &h, NULL);
    write_heap(h, "empty");
    mp_img_root_set(h, "nothing", NULL, NULL);
    write_heap(h, "nil-root");
    mp_img_root_set(h, "list", fx_list(h, &f, 20), NULL);
    write_heap(h, "list");
    mp_img_heap_free(h);

    /* Broken ones. */
    variant("all-kinds", "bad-ref", m_ref, 0, 1);
    variant("all-kinds", "bad-checksum", m_flip, 0, 0);
    variant("all-kinds", "truncated", NULL, 300, 0);
    variant("all-kinds", "arch-mismatch", m_arch, 0, 1);
    variant("all-kinds", "byte-swapped", m_swap, 0, 1);
    variant("all-kinds", "incomplete", m_incomplete, 0, 1);
    variant("list", "bad-count", m_objects, 0, 1);
    variant("list", "bad-magic", m_magic, 0, 0);
    variant("list", "bad-run", m_run, 0, 1);
    fx_free(&f);
    return 0;
}
