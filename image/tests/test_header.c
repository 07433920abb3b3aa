/* SPDX-License-Identifier: MIT */
/* Verify and arm: every header field that differs from this process or
 * registry is refused, with the field named, before anything is allocated
 * and before any foreign value is reacquired (the image holds an
 * externalised entry, and internalise is never called). The two exceptions
 * are what only the pass over the object region can see: the checksum of
 * the whole file and the object count; they are refused before a heap is
 * handed out, after the foreign table (which the head checksum vouches
 * for) was resolved. */
#include "fixture.h"

#include "format.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct fx f;
static unsigned char *img;
static size_t len;

static void setup(void)
{
    fx_init(&f, 0);
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_word *n = mp_img_alloc(h, f.node, 2);
    mp_img_word *hd = mp_img_alloc(h, f.handle, 1);
    hd[0] = 3;
    mp_img_word *s = mp_img_alloc(h, f.cstr, 1);
    s[0] = (mp_img_word) "text";
    n[0] = (mp_img_word)hd;
    n[1] = (mp_img_word)s;
    mp_img_root_set(h, "root", n, NULL);
    char *path = fx_path("header-base.mpimg");
    cr_assert_eq(mp_img_write(h, path, NULL), MP_IMG_OK);
    img = fx_read(path, &len);
    free(path);
    mp_img_heap_free(h);
}

static void teardown(void)
{
    free(img);
    fx_free(&f);
}

TestSuite(header, .init = setup, .fini = teardown);

static struct img_header *hdr(unsigned char *p) { return (struct img_header *)p; }

/* Loads a modified copy (checksum made valid again unless told not to)
 * and expects a refusal naming `field`, with nothing allocated. */
static void expect_refusal_after(void (*mutate)(unsigned char *), int fix, mp_img_registry *reg,
                                 mp_img_status status, const char *field, int reacquired)
{
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    if (mutate)
        mutate(copy);
    if (fix)
        fx_fix_checksum(copy, len);
    f.internalised = 0;
    mp_img_heap *out = (mp_img_heap *)1;
    mp_img_error err;
    cr_assert_eq(mp_img_load_memory(reg ? reg : f.reg, copy, len, &out, &err), status,
                 "field %s: got %s (%s)", field, mp_img_strerror(err.status), err.detail);
    cr_assert_null(out, "no heap on refusal");
    cr_assert_eq(f.internalised, reacquired, "a foreign value was reacquired before the refusal");
    cr_assert(strstr(err.detail, field) != NULL, "'%s' not named in: %s", field, err.detail);
    free(copy);
}

static void expect_refusal(void (*mutate)(unsigned char *), int fix, mp_img_registry *reg,
                           mp_img_status status, const char *field)
{
    expect_refusal_after(mutate, fix, reg, status, field, 0);
}

static void set_text(char field[IMG_TEXT_FIELD], const char *s)
{
    memset(field, 0, IMG_TEXT_FIELD);
    memcpy(field, s, strlen(s));
}

static void m_magic(unsigned char *p) { p[1] = 'X'; }
static void m_version(unsigned char *p) { hdr(p)->version = IMG_VERSION + 1; }
static void m_version_swapped(unsigned char *p) { hdr(p)->version = IMG_VERSION_SWAPPED; }
static void m_header_size(unsigned char *p) { hdr(p)->header_size = 200; }
static void m_byte_order(unsigned char *p) { hdr(p)->byte_order = IMG_BYTE_ORDER_SWAPPED; }
static void m_byte_garbage(unsigned char *p) { hdr(p)->byte_order = 42; }
static void m_word_size(unsigned char *p) { hdr(p)->word_size = 4; }
static void m_release(unsigned char *p) { set_text(hdr(p)->release, "9.9.9"); }
static void m_os(unsigned char *p) { set_text(hdr(p)->os, "plan9"); }
static void m_arch(unsigned char *p) { set_text(hdr(p)->arch, "vax"); }
static void m_meta(unsigned char *p) { hdr(p)->meta_width = 1; }
static void m_digest(unsigned char *p) { hdr(p)->type_digest ^= 1; }
static void m_incomplete(unsigned char *p) { hdr(p)->incomplete = IMG_INCOMPLETE; }
static void m_checksum(unsigned char *p) { hdr(p)->checksum ^= 0x100; }
static void m_head_checksum(unsigned char *p) { hdr(p)->head_checksum ^= 0x100; }
static void m_foreign_table(unsigned char *p)
{
    p[sizeof(struct img_header) + hdr(p)->types_size] ^= 1;
}
static void m_reserved(unsigned char *p) { hdr(p)->reserved = 1; }
static void m_objects(unsigned char *p) { hdr(p)->n_objects += 1; }
static void m_blob(unsigned char *p) { hdr(p)->n_bytes -= 8; }

Test(header, the_base_image_loads)
{
    mp_img_heap *out;
    mp_img_error err;
    cr_assert_eq(mp_img_load_memory(f.reg, img, len, &out, &err), MP_IMG_OK, "%s", err.detail);
    cr_assert_eq(f.internalised, 1);
    mp_img_heap_free(out);
}

Test(header, magic) { expect_refusal(m_magic, 1, NULL, MP_IMG_E_NOT_IMAGE, "'magic'"); }
Test(header, format_version)
{
    expect_refusal(m_version, 1, NULL, MP_IMG_E_MISMATCH, "'format version'");
}
Test(header, byte_swapped_version)
{
    expect_refusal(m_version_swapped, 1, NULL, MP_IMG_E_MISMATCH, "'byte order'");
}
Test(header, header_size)
{
    expect_refusal(m_header_size, 1, NULL, MP_IMG_E_MISMATCH, "'header size'");
}
Test(header, byte_order)
{
    expect_refusal(m_byte_order, 1, NULL, MP_IMG_E_MISMATCH, "'byte order'");
    expect_refusal(m_byte_garbage, 1, NULL, MP_IMG_E_MISMATCH, "'byte order'");
}
Test(header, word_size) { expect_refusal(m_word_size, 1, NULL, MP_IMG_E_MISMATCH, "'word size'"); }
Test(header, release) { expect_refusal(m_release, 1, NULL, MP_IMG_E_MISMATCH, "'release'"); }
Test(header, os) { expect_refusal(m_os, 1, NULL, MP_IMG_E_MISMATCH, "'os'"); }
Test(header, arch) { expect_refusal(m_arch, 1, NULL, MP_IMG_E_MISMATCH, "'arch'"); }
Test(header, metadata_width)
{
    expect_refusal(m_meta, 1, NULL, MP_IMG_E_MISMATCH, "'metadata width'");
    struct fx wide;
    fx_init(&wide, 2);
    expect_refusal(NULL, 0, wide.reg, MP_IMG_E_MISMATCH, "'metadata width'");
    fx_free(&wide);
}
Test(header, type_digest)
{
    expect_refusal(m_digest, 1, NULL, MP_IMG_E_MISMATCH, "'type digest'");
    /* A registry with one more type. */
    struct fx more;
    fx_init(&more, 0);
    mp_img_type_register(more.reg, "extra", NULL, NULL, NULL);
    expect_refusal(NULL, 0, more.reg, MP_IMG_E_MISMATCH, "(12 types, the registry has 13)");
    fx_free(&more);
    /* A registry whose types are in another order. */
    mp_img_registry *other;
    mp_img_registry_new(0, &other, NULL);
    mp_img_type_register(other, "leaf", &(mp_img_type_options){.spelling = "word"}, NULL, NULL);
    for (int i = 1; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        mp_img_type_register(other, name, NULL, NULL, NULL);
    }
    expect_refusal(NULL, 0, other, MP_IMG_E_MISMATCH,
                   "(type 0 is 'node' in the image, 'leaf' in the registry)");
    mp_img_registry_free(other);
}
Test(header, incomplete_marker)
{
    expect_refusal(m_incomplete, 1, NULL, MP_IMG_E_INCOMPLETE, "'incomplete'");
}
Test(header, checksum)
{
    expect_refusal(m_head_checksum, 0, NULL, MP_IMG_E_CHECKSUM, "'head checksum'");
    /* damage in the foreign table is the head checksum's */
    expect_refusal(m_foreign_table, 0, NULL, MP_IMG_E_CHECKSUM, "'head checksum'");
    expect_refusal_after(m_checksum, 0, NULL, MP_IMG_E_CHECKSUM, "'checksum'", 1);
}
Test(header, reserved) { expect_refusal(m_reserved, 1, NULL, MP_IMG_E_CORRUPT, "'reserved'"); }
Test(header, counts_that_do_not_add_up)
{
    expect_refusal_after(m_objects, 1, NULL, MP_IMG_E_CORRUPT,
                         "the region holds 3 objects, the header declares 4", 1);
    expect_refusal(m_blob, 1, NULL, MP_IMG_E_CORRUPT, "bytes");
}
