/* SPDX-License-Identifier: MIT */
/* Round trips: generated graphs written and loaded back, compared
 * structurally and by identity (shared stays shared, distinct stays
 * distinct), in-process. */
#include "fixture.h"

#include "format.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fx f;
static mp_img_heap *h;

static void setup(void)
{
    fx_init(&f, 0);
    cr_assert_eq(mp_img_heap_new(f.reg, &h, NULL), MP_IMG_OK);
}

static void teardown(void)
{
    mp_img_heap_free(h);
    fx_free(&f);
}

TestSuite(roundtrip, .init = setup, .fini = teardown);

/* Writes h, loads it into a new heap and checks the two are isomorphic. */
static mp_img_heap *round_trip(mp_img_heap *src, struct fx *fx, const char *name)
{
    char *path = fx_path(name);
    mp_img_error err;
    cr_assert_eq(mp_img_write(src, path, &err), MP_IMG_OK, "write: %s", err.detail);
    mp_img_heap *back = NULL;
    cr_assert_eq(mp_img_load(fx->reg, path, &back, &err), MP_IMG_OK, "load: %s", err.detail);
    cr_assert_eq(mp_img_verify(path, &err), MP_IMG_OK, "verify: %s", err.detail);
    char why[256];
    cr_assert(fx_iso_roots(src, back, why), "%s: %s", name, why);
    free(path);
    return back;
}

static mp_img_word *leaf(mp_img_heap *hp, mp_img_word v)
{
    mp_img_word *l = mp_img_alloc(hp, f.leaf, 1);
    l[0] = v;
    return l;
}

static mp_img_word *node(mp_img_heap *hp, void *a, void *b)
{
    mp_img_word *n = mp_img_alloc(hp, f.node, 2);
    n[0] = (mp_img_word)a;
    n[1] = (mp_img_word)b;
    return n;
}

Test(roundtrip, long_list)
{
    void *list = NULL;
    for (int i = 0; i < 100000; i++)
        list = node(h, leaf(h, (mp_img_word)i), list);
    mp_img_root_set(h, "list", list, NULL);
    mp_img_heap *back = round_trip(h, &f, "list.mpimg");
    mp_img_word *c = mp_img_root_get(back, "list");
    for (int i = 99999; i >= 0; i--, c = (mp_img_word *)c[1])
        cr_assert_eq(((mp_img_word *)c[0])[0], (mp_img_word)i);
    cr_assert_null(c);
    cr_assert_eq(mp_img_heap_count(back), 200000);
    mp_img_heap_free(back);
}

static void *tree(mp_img_heap *hp, int depth, void *shared)
{
    if (depth == 0)
        return shared;
    return node(hp, tree(hp, depth - 1, shared), tree(hp, depth - 1, shared));
}

Test(roundtrip, tree_with_sharing)
{
    mp_img_word *shared = leaf(h, 7);
    void *t = tree(h, 12, shared);
    mp_img_root_set(h, "tree", t, NULL);
    mp_img_root_set(h, "shared", shared, NULL);
    mp_img_heap *back = round_trip(h, &f, "tree.mpimg");
    /* Every leaf of the loaded tree is the one loaded shared object. */
    mp_img_word *s = mp_img_root_get(back, "shared");
    mp_img_word *p = mp_img_root_get(back, "tree");
    while (mp_img_type_of(back, p) == f.node)
        p = (mp_img_word *)p[1];
    cr_assert_eq(p, s);
    cr_assert_eq(mp_img_heap_count(back), 4096);
    mp_img_heap_free(back);
}

Test(roundtrip, distinct_objects_stay_distinct)
{
    /* Two equal leaves are two objects; one leaf referenced twice is one. */
    mp_img_word *a = leaf(h, 1), *b = leaf(h, 1);
    mp_img_word *twice = node(h, a, a), *pair = node(h, a, b);
    mp_img_root_set(h, "twice", twice, NULL);
    mp_img_root_set(h, "pair", pair, NULL);
    mp_img_heap *back = round_trip(h, &f, "distinct.mpimg");
    mp_img_word *t = mp_img_root_get(back, "twice"), *q = mp_img_root_get(back, "pair");
    cr_assert_eq(t[0], t[1]);
    cr_assert_eq(q[0], t[0]);
    cr_assert_neq(q[0], q[1]);
    mp_img_heap_free(back);
}

Test(roundtrip, cycles_and_self_references)
{
    mp_img_word *a = node(h, NULL, NULL), *b = node(h, NULL, NULL);
    a[0] = (mp_img_word)b;
    b[0] = (mp_img_word)a;
    a[1] = (mp_img_word)a; /* self */
    b[1] = (mp_img_word)b;
    mp_img_root_set(h, "cycle", a, NULL);
    mp_img_heap *back = round_trip(h, &f, "cycle.mpimg");
    mp_img_word *x = mp_img_root_get(back, "cycle");
    mp_img_word *y = (mp_img_word *)x[0];
    cr_assert_eq((mp_img_word *)y[0], x);
    cr_assert_eq((mp_img_word *)x[1], x);
    cr_assert_eq((mp_img_word *)y[1], y);
    mp_img_heap_free(back);
}

Test(roundtrip, vectors_with_slot0_counts)
{
    mp_img_word *v = mp_img_alloc(h, f.vec, 11);
    for (int i = 1; i <= 10; i++)
        v[i] = (mp_img_word)(i % 2 ? (void *)leaf(h, (mp_img_word)i) : (void *)v);
    mp_img_word *empty = mp_img_alloc(h, f.vec, 1);
    /* Allocated for 8, holding 3: only the counted units are imaged. */
    mp_img_word *part = mp_img_alloc(h, f.vec, 9);
    part[0] = 3;
    part[1] = (mp_img_word)empty;
    mp_img_root_set(h, "v", v, NULL);
    mp_img_root_set(h, "part", part, NULL);
    mp_img_heap *back = round_trip(h, &f, "vec.mpimg");
    mp_img_word *w = mp_img_root_get(back, "v");
    cr_assert_eq(w[0], 10);
    cr_assert_eq((mp_img_word *)w[2], w);
    mp_img_word *p = mp_img_root_get(back, "part");
    cr_assert_eq(p[0], 3);
    cr_assert_eq(mp_img_units(p), 4);
    cr_assert_eq(((mp_img_word *)p[1])[0], 0);
    mp_img_heap_free(back);
}

Test(roundtrip, strings_with_embedded_nuls)
{
    static const char data[] = "a\0b\0\0c\xff";
    mp_img_word *s = mp_img_alloc(h, f.str, 2);
    s[0] = sizeof data; /* 9 bytes, the final NUL included */
    s[1] = (mp_img_word)data;
    mp_img_word *empty = mp_img_alloc(h, f.str, 2);
    empty[1] = (mp_img_word) "";
    mp_img_word *null = mp_img_alloc(h, f.str, 2);
    mp_img_word *c = mp_img_alloc(h, f.cstr, 1);
    c[0] = (mp_img_word) "plain C string";
    mp_img_word *big = mp_img_alloc(h, f.str, 2);
    char *bytes = malloc(100000);
    for (int i = 0; i < 100000; i++)
        bytes[i] = (char)(i * 7);
    big[0] = 100000;
    big[1] = (mp_img_word)bytes;
    mp_img_word *v = mp_img_alloc(h, f.vec, 6);
    v[1] = (mp_img_word)s, v[2] = (mp_img_word)empty, v[3] = (mp_img_word)null;
    v[4] = (mp_img_word)c, v[5] = (mp_img_word)big;
    mp_img_root_set(h, "strings", v, NULL);
    mp_img_heap *back = round_trip(h, &f, "strings.mpimg");
    mp_img_word *w = mp_img_root_get(back, "strings");
    mp_img_word *s2 = (mp_img_word *)w[1];
    cr_assert_eq(s2[0], sizeof data);
    cr_assert_eq(memcmp((void *)s2[1], data, sizeof data), 0);
    cr_assert_eq(((char *)s2[1])[sizeof data], '\0', "a NUL follows the stored bytes");
    cr_assert_eq(((mp_img_word *)w[3])[1], 0, "a NULL bytes pointer stays NULL");
    cr_assert_str_eq((const char *)((mp_img_word *)w[4])[0], "plain C string");
    cr_assert_eq(memcmp((void *)((mp_img_word *)w[5])[1], bytes, 100000), 0);
    free(bytes);
    mp_img_heap_free(back);
}

Test(roundtrip, empty_graph)
{
    mp_img_alloc(h, f.node, 2); /* unreachable: not imaged */
    mp_img_heap *back = round_trip(h, &f, "empty.mpimg");
    cr_assert_eq(mp_img_heap_count(back), 0);
    cr_assert_eq(mp_img_root_count(back), 0);
    mp_img_heap_free(back);
}

Test(roundtrip, single_nil_root)
{
    mp_img_root_set(h, "nothing", NULL, NULL);
    mp_img_heap *back = round_trip(h, &f, "nil.mpimg");
    void *v = (void *)1;
    cr_assert(mp_img_root_find(back, "nothing", &v));
    cr_assert_null(v);
    cr_assert_eq(mp_img_heap_count(back), 0);
    mp_img_heap_free(back);
}

Test(roundtrip, flags_metadata_and_per_object_shapes)
{
    struct fx g;
    fx_init(&g, 3);
    mp_img_heap *hm;
    mp_img_heap_new(g.reg, &hm, NULL);
    mp_img_word *a = mp_img_alloc(hm, g.var, 5), *b = mp_img_alloc(hm, g.var, 2);
    a[0] = 2; /* word, then two refs; units 3 and 4 are not part of it */
    a[1] = (mp_img_word)b;
    a[2] = (mp_img_word)a;
    b[0] = 0;
    mp_img_set_flags(a, 0x4001);
    mp_img_word *m = mp_img_meta(hm, a);
    m[0] = 1, m[1] = 2, m[2] = 3;
    mp_img_root_set(hm, "var", a, NULL);
    mp_img_heap *back = round_trip(hm, &g, "var.mpimg");
    mp_img_word *x = mp_img_root_get(back, "var");
    cr_assert_eq(mp_img_units(x), 3);
    cr_assert_eq(mp_img_flags(x), 0x4001);
    cr_assert_eq(mp_img_meta(back, x)[2], 3);
    mp_img_heap_free(back);
    mp_img_heap_free(hm);
    fx_free(&g);
}

int imgtest_exported(int x);
int imgtest_exported(int x) { return x * 2; }

Test(roundtrip, foreign_vocabulary_in_process)
{
    mp_img_word *fd = mp_img_alloc(h, f.fn, 2);
    fd[0] = (mp_img_word)stderr;
    mp_img_word *sym = mp_img_alloc(h, f.fn, 2);
    sym[0] = (mp_img_word)(uintptr_t)&abs; /* libc */
    mp_img_word *none = mp_img_alloc(h, f.fn, 2);
    mp_img_word *hd = mp_img_alloc(h, f.handle, 1);
    hd[0] = 42;
    mp_img_word *hd2 = mp_img_alloc(h, f.handle, 1);
    hd2[0] = 42; /* the same value: one foreign entry */
    mp_img_word *tmp = mp_img_alloc(h, f.temp, 2);
    tmp[0] = 5;
    tmp[1] = (mp_img_word)&tmp;                   /* a stack address: transient, dropped */
    mp_img_word *raw = mp_img_alloc(h, f.raw, 1); /* NULL: nil needs no policy */
    mp_img_word *code = mp_img_alloc(h, f.code, 2);
    code[0] = (mp_img_word)(uintptr_t)&imgtest_exported + 1;
    mp_img_word *v = mp_img_alloc(h, f.vec, 9);
    mp_img_word *all[] = {fd, sym, none, hd, hd2, tmp, raw, code};
    for (int i = 0; i < 8; i++)
        v[i + 1] = (mp_img_word)all[i];
    mp_img_root_set(h, "foreign", v, NULL);
    f.internalised = 0;
    mp_img_heap *back = round_trip(h, &f, "foreign.mpimg");
    cr_assert_eq(f.internalised, 1, "one entry for two units of one value");
    mp_img_word *w = mp_img_root_get(back, "foreign");
    cr_assert_eq(((mp_img_word *)w[1])[0], (mp_img_word)stderr);
    int (*fnp)(int) = (int (*)(int))((mp_img_word *)w[2])[0];
    cr_assert_eq(fnp(-5), 5);
    cr_assert_eq(((mp_img_word *)w[6])[1], 0, "dropped");
    mp_img_code loc;
    cr_assert(mp_img_code_lookup(back, ((mp_img_word *)w[8])[0], &loc));
    cr_assert_eq(loc.address, (uintptr_t)&imgtest_exported + 1, "resolved in this process");
    cr_assert_gt(loc.build_id_len, 0);
    mp_img_heap_free(back);
}

Test(roundtrip, named_code_locations_are_written_again_as_themselves)
{
    /* An image whose code entry names a module no process has (its build-id
     * altered), loaded, written again and loaded again: the location keeps
     * its name, byte for byte. */
    mp_img_word *code = mp_img_alloc(h, f.code, 2);
    code[0] = (mp_img_word)(uintptr_t)&imgtest_exported + 1;
    code[1] = 77;
    mp_img_root_set(h, "code", code, NULL);
    char *p1 = fx_path("code1.mpimg"), *p2 = fx_path("code2.mpimg"), *p3 = fx_path("code3.mpimg");
    cr_assert_eq(mp_img_write(h, p1, NULL), MP_IMG_OK);
    size_t len;
    unsigned char *img = fx_read(p1, &len);
    struct img_header hd;
    memcpy(&hd, img, sizeof hd);
    size_t entry = sizeof hd + hd.types_size; /* the only foreign entry */
    uint64_t kind;
    memcpy(&kind, img + entry, 8);
    cr_assert_eq(kind, IMG_FOREIGN_CODE);
    img[entry + 16] ^= 0xFF; /* the first build-id byte */
    fx_fix_checksum(img, len);
    cr_assert_eq(fx_write(p2, img, len), 0);

    mp_img_heap *a;
    mp_img_error err;
    cr_assert_eq(mp_img_load(f.reg, p2, &a, &err), MP_IMG_OK, "%s", err.detail);
    mp_img_code loc;
    mp_img_word *c = mp_img_root_get(a, "code");
    cr_assert(mp_img_code_lookup(a, c[0], &loc));
    cr_assert_eq(loc.address, 0, "no module has that build-id: a named location");
    cr_assert_eq(loc.build_id[0], img[entry + 16]);
    cr_assert_eq(c[1], 77);
    cr_assert_eq(mp_img_write(a, p3, &err), MP_IMG_OK, "%s", err.detail);
    size_t len3;
    unsigned char *img3 = fx_read(p3, &len3);
    cr_assert_eq(len3, len);
    cr_assert_eq(memcmp(img3, img, len), 0, "written again, the same bytes");
    free(img3);
    free(img);
    mp_img_heap_free(a);
    free(p1);
    free(p2);
    free(p3);
}

/* mp_img_registry_allow_foreign: an image holding a refused kind is refused
 * with the entry named, before anything is reacquired; allowing it again
 * loads the same file. */
static char *write_one(mp_img_word value, const char *name)
{
    mp_img_word *o = mp_img_alloc(h, f.fn, 2);
    o[0] = value;
    mp_img_root_set(h, "o", o, NULL);
    char *path = fx_path(name);
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, path, &err), MP_IMG_OK, "write: %s", err.detail);
    return path;
}

Test(roundtrip, refused_foreign_kinds_name_the_entry)
{
    char *dl = write_one((mp_img_word)(uintptr_t)&abs, "allow-dlsym.mpimg");
    mp_img_heap *back = NULL;
    mp_img_error err;
    cr_assert_eq(mp_img_registry_allow_foreign(f.reg, MP_IMG_ALLOW_CODE, &err), MP_IMG_OK);
    cr_assert_eq(mp_img_load(f.reg, dl, &back, &err), MP_IMG_E_FOREIGN);
    cr_assert_null(back);
    const char *tail = ", abs): this loader does not allow dlsym entries (loading it would open "
                       "that library)";
    cr_assert_eq(strncmp(err.detail, "foreign entry 1 is dlsym(", 25), 0, "%s", err.detail);
    size_t n = strlen(err.detail), t = strlen(tail);
    cr_assert(n > t && strcmp(err.detail + n - t, tail) == 0, "%s", err.detail);

    mp_img_heap_free(h);
    cr_assert_eq(mp_img_heap_new(f.reg, &h, NULL), MP_IMG_OK);
    char *fd = write_one((mp_img_word)stderr, "allow-fd.mpimg");
    cr_assert_eq(mp_img_load(f.reg, fd, &back, &err), MP_IMG_E_FOREIGN);
    cr_assert_str_eq(err.detail, "foreign entry 1 is of kind fd, which this loader does not allow");
    cr_assert_eq(mp_img_registry_allow_foreign(f.reg, MP_IMG_ALLOW_ALL & ~MP_IMG_ALLOW_DLSYM, &err),
                 MP_IMG_OK);
    cr_assert_eq(mp_img_load(f.reg, fd, &back, &err), MP_IMG_OK, "%s", err.detail);
    mp_img_heap_free(back);

    cr_assert_eq(mp_img_registry_allow_foreign(f.reg, MP_IMG_ALLOW_ALL, &err), MP_IMG_OK);
    cr_assert_eq(mp_img_load(f.reg, dl, &back, &err), MP_IMG_OK, "%s", err.detail);
    int (*fnp)(int) = (int (*)(int))((mp_img_word *)mp_img_root_get(back, "o"))[0];
    cr_assert_eq(fnp(-3), 3, "the dlsym entry is reacquired once allowed");
    mp_img_heap_free(back);

    cr_assert_eq(mp_img_registry_allow_foreign(NULL, MP_IMG_ALLOW_ALL, &err), MP_IMG_E_ARGUMENT);
    cr_assert_eq(mp_img_registry_allow_foreign(f.reg, 1u << 7, &err), MP_IMG_E_ARGUMENT);
    cr_assert_str_eq(err.detail, "foreign kinds 0x80: unknown bits 0x80");
    free(dl);
    free(fd);
}
