/* SPDX-License-Identifier: MIT */
/* Verify and arm, the first half: every header field checked, in the order
 * FORMAT.md lists them, each refusal naming its field; then sizes, the
 * head checksum, and the tables. Nothing here allocates an object or reacquires
 * a foreign value. Every read is bounds-checked against `len` first. */
#include "view.h"

#include "checksum.h"

#include <stdio.h>
#include <stdlib.h>

void img_text_field(const char field[IMG_TEXT_FIELD], char out[IMG_TEXT_FIELD])
{
    memcpy(out, field, IMG_TEXT_FIELD - 1);
    out[IMG_TEXT_FIELD - 1] = '\0';
}

/* A cursor over one section: reads never pass `end`. */
struct cur {
    const unsigned char *p, *end;
};

static int take_word(struct cur *c, uint64_t *w)
{
    if ((size_t)(c->end - c->p) < 8)
        return -1;
    *w = img_rd64(c->p);
    c->p += 8;
    return 0;
}

static int take_str(struct cur *c, size_t max, const unsigned char **s, size_t *len)
{
    uint64_t n;
    if (take_word(c, &n) || n > max || img_pad8(n) > (uint64_t)(c->end - c->p))
        return -1;
    /* Padding is zero, so an image has one spelling. */
    for (uint64_t i = n; i < img_pad8(n); i++)
        if (c->p[i])
            return -1;
    *s = c->p;
    *len = (size_t)n;
    c->p += img_pad8(n);
    return 0;
}

static mp_img_status text_mismatch(mp_img_error *err, const char *field, const char *have,
                                   const char *want)
{
    char a[IMG_TEXT_FIELD], b[IMG_TEXT_FIELD];
    img_text_field(have, a);
    img_text_field(want, b);
    return img_fail(err, MP_IMG_E_MISMATCH,
                    "header field '%s': the image has '%s', this process has '%s'", field, a, b);
}

/* Fields that must match the loading process (and registry, if any). */
static mp_img_status check_identity(const struct img_view *v, const mp_img_registry *reg,
                                    mp_img_error *err)
{
    const struct img_header *hd = &v->hd;
    if (memcmp(hd->magic, IMG_MAGIC, IMG_MAGIC_LEN) != 0)
        return img_fail(err, MP_IMG_E_NOT_IMAGE, "header field 'magic': not an image");
    if (hd->version == IMG_VERSION_SWAPPED || hd->byte_order == IMG_BYTE_ORDER_SWAPPED)
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'byte order': the image was written with the other byte "
                        "order");
    if (hd->version != IMG_VERSION)
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'format version': the image has %u, this library reads %u",
                        (unsigned)hd->version, (unsigned)IMG_VERSION);
    if (hd->header_size != sizeof(struct img_header))
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'header size': the image has %u, this library reads %zu",
                        (unsigned)hd->header_size, sizeof(struct img_header));
    if (hd->byte_order != IMG_BYTE_ORDER)
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'byte order': 0x%016llx is not a byte-order word",
                        (unsigned long long)hd->byte_order);
    if (hd->word_size != sizeof(mp_img_word))
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'word size': the image has %u, this process has %zu",
                        (unsigned)hd->word_size, sizeof(mp_img_word));
    if (!reg)
        return MP_IMG_OK;
    char release[IMG_TEXT_FIELD], os[IMG_TEXT_FIELD], arch[IMG_TEXT_FIELD];
    img_platform(release, os, arch);
    if (memcmp(hd->release, release, IMG_TEXT_FIELD) != 0)
        return text_mismatch(err, "release", hd->release, release);
    if (memcmp(hd->os, os, IMG_TEXT_FIELD) != 0)
        return text_mismatch(err, "os", hd->os, os);
    if (memcmp(hd->arch, arch, IMG_TEXT_FIELD) != 0)
        return text_mismatch(err, "arch", hd->arch, arch);
    if (hd->meta_width != reg->meta_width)
        return img_fail(err, MP_IMG_E_MISMATCH,
                        "header field 'metadata width': the image has %u, the registry has %zu",
                        (unsigned)hd->meta_width, reg->meta_width);
    return MP_IMG_OK;
}

/* The section layout: sizes add up to the file, every section word-sized. */
static mp_img_status check_sizes(struct img_view *v, mp_img_error *err)
{
    const struct img_header *hd = &v->hd;
    uint64_t sizes[6] = {hd->types_size,   hd->foreign_size, hd->roots_size,
                         hd->objects_size, hd->shapes_size,  hd->n_bytes};
    static const char *const names[6] = {"type table",    "foreign table", "root table",
                                         "object region", "shape table",   "byte blob"};
    uint64_t at = sizeof(struct img_header);
    const unsigned char **starts[6] = {&v->types_at,   &v->foreign_at, &v->roots_at,
                                       &v->objects_at, &v->shapes_at,  &v->blob_at};
    for (int i = 0; i < 6; i++) {
        if (sizes[i] % 8)
            return img_fail(err, MP_IMG_E_CORRUPT, "the %s size %llu is not a whole word", names[i],
                            (unsigned long long)sizes[i]);
        if (sizes[i] > v->len - at)
            return img_fail(err, MP_IMG_E_CORRUPT,
                            "truncated: the %s needs %llu bytes at offset %llu, the image has "
                            "%zu",
                            names[i], (unsigned long long)sizes[i], (unsigned long long)at, v->len);
        *starts[i] = v->data + at;
        at += sizes[i];
    }
    if (at != v->len)
        return img_fail(err, MP_IMG_E_CORRUPT,
                        "the header accounts for %llu bytes, the image has %zu",
                        (unsigned long long)at, v->len);
    if (hd->reserved)
        return img_fail(err, MP_IMG_E_CORRUPT, "header field 'reserved' is not zero");
    /* Every object takes a header word at least in memory; a run stores
     * N >= 2 header words as two, so the file never holds more words than
     * memory will, and (its objects have a unit at least, of 32 bits when
     * packed) memory never more than four times the file's. */
    if (hd->region_words < hd->objects_size / 8 || hd->region_words / 4 > hd->objects_size / 8 ||
        hd->region_words > IMG_MAX_REGION_WORDS)
        return img_fail(err, MP_IMG_E_CORRUPT,
                        "header field 'region words': %llu words for a %llu-byte region",
                        (unsigned long long)hd->region_words, (unsigned long long)hd->objects_size);
    if (hd->n_objects > hd->region_words || (hd->objects_size == 0) != (hd->n_objects == 0))
        return img_fail(err, MP_IMG_E_CORRUPT, "header declares %llu objects in %llu bytes",
                        (unsigned long long)hd->n_objects, (unsigned long long)hd->objects_size);
    if (hd->shapes_size % 16)
        return img_fail(err, MP_IMG_E_CORRUPT, "the shape table size %llu is not whole entries",
                        (unsigned long long)hd->shapes_size);
    v->words = hd->region_words;
    v->file_words = hd->objects_size / 8;
    return MP_IMG_OK;
}

static mp_img_status parse_types(struct img_view *v, mp_img_error *err)
{
    uint64_t n = v->hd.n_types;
    if (n > IMG_MAX_TYPES || n > v->hd.types_size / 48)
        return img_fail(err, MP_IMG_E_CORRUPT, "type table: %llu types do not fit",
                        (unsigned long long)n);
    v->types = calloc(n ? n : 1, sizeof *v->types);
    if (!v->types)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory reading the type table");
    struct cur c = {v->types_at, v->types_at + v->hd.types_size};
    for (uint64_t i = 0; i < n; i++) {
        struct img_vtype *t = &v->types[i];
        uint64_t w[5];
        if (take_str(&c, IMG_NAME_MAX, &t->name, &t->name_len) || t->name_len == 0 ||
            memchr(t->name, 0, t->name_len))
            return img_fail(err, MP_IMG_E_CORRUPT, "type table: entry %llu has a bad name",
                            (unsigned long long)i);
        for (int k = 0; k < 5; k++)
            if (take_word(&c, &w[k]))
                return img_fail(err, MP_IMG_E_CORRUPT, "type table: entry %llu is cut short",
                                (unsigned long long)i);
        t->shape_class = (unsigned)w[0];
        t->shape = (mp_img_shape){w[0] == IMG_SHAPE_DYNAMIC, (uint32_t)w[1], (uint32_t)w[2], w[3]};
        t->policy = (unsigned)w[4];
        mp_img_shape canon = t->shape;
        if (w[0] > IMG_SHAPE_CUSTOM || w[1] > UINT32_MAX || w[2] > MP_IMG_MASK_UNITS ||
            w[4] > MP_IMG_FOREIGN_CALLBACKS || img_shape_check(&t->shape, NULL) != MP_IMG_OK)
            return img_fail(err, MP_IMG_E_CORRUPT, "type table: entry %llu is not a type",
                            (unsigned long long)i);
        img_shape_canon(&canon);
        if ((w[0] == IMG_SHAPE_NONE || w[0] == IMG_SHAPE_CUSTOM)
                ? (w[1] | w[2] | w[3]) != 0
                : !img_shape_equal(&canon, &t->shape))
            return img_fail(err, MP_IMG_E_CORRUPT,
                            "type table: entry %llu has a shape not in canonical form",
                            (unsigned long long)i);
    }
    if (c.p != c.end)
        return img_fail(err, MP_IMG_E_CORRUPT, "type table: bytes left after %llu types",
                        (unsigned long long)n);
    if (img_hash(v->types_at, v->hd.types_size) != v->hd.type_digest)
        return img_fail(err, MP_IMG_E_CORRUPT,
                        "header field 'type digest' does not match the type table");
    return MP_IMG_OK;
}

static mp_img_status parse_foreign(struct img_view *v, mp_img_error *err)
{
    uint64_t n = v->hd.n_foreign;
    if (n > v->hd.foreign_size / 16)
        return img_fail(err, MP_IMG_E_CORRUPT, "foreign table: %llu entries do not fit",
                        (unsigned long long)n);
    v->foreign = calloc(n ? n : 1, sizeof *v->foreign);
    if (!v->foreign)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory reading the foreign table");
    struct cur c = {v->foreign_at, v->foreign_at + v->hd.foreign_size};
    for (uint64_t i = 0; i < n; i++) {
        struct img_foreign *f = &v->foreign[i];
        uint64_t kind = 0;
        int bad = take_word(&c, &kind);
        f->kind = (unsigned)kind;
        if (!bad) {
            switch (kind) {
            case IMG_FOREIGN_DLSYM:
                bad = take_str(&c, IMG_STR_MAX, &f->a, &f->a_len) ||
                      take_str(&c, IMG_STR_MAX, &f->b, &f->b_len);
                break;
            case IMG_FOREIGN_FD:
                bad = take_word(&c, &f->n) || f->n > 2;
                break;
            case IMG_FOREIGN_CODE:
                bad = take_str(&c, IMG_STR_MAX, &f->a, &f->a_len) ||
                      take_str(&c, IMG_STR_MAX, &f->b, &f->b_len) || take_word(&c, &f->n) ||
                      f->a_len == 0;
                v->n_code++;
                break;
            case IMG_FOREIGN_EXT:
                bad = take_word(&c, &f->n) || f->n >= v->hd.n_types ||
                      v->types[f->n].policy != MP_IMG_FOREIGN_CALLBACKS ||
                      take_str(&c, IMG_STR_MAX, &f->a, &f->a_len);
                break;
            default:
                bad = 1;
            }
        }
        if (bad)
            return img_fail(err, MP_IMG_E_CORRUPT, "foreign table: entry %llu is malformed",
                            (unsigned long long)i + 1);
    }
    if (c.p != c.end)
        return img_fail(err, MP_IMG_E_CORRUPT, "foreign table: bytes left after %llu entries",
                        (unsigned long long)n);
    return MP_IMG_OK;
}

static mp_img_status parse_roots(struct img_view *v, mp_img_error *err)
{
    uint64_t n = v->hd.n_roots;
    if (n > v->hd.roots_size / 24)
        return img_fail(err, MP_IMG_E_CORRUPT, "root table: %llu roots do not fit",
                        (unsigned long long)n);
    v->roots = calloc(n ? n : 1, sizeof *v->roots);
    if (!v->roots)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory reading the root table");
    struct cur c = {v->roots_at, v->roots_at + v->hd.roots_size};
    for (uint64_t i = 0; i < n; i++) {
        struct img_vroot *r = &v->roots[i];
        if (take_word(&c, &r->index) || (r->index && r->index >= v->words) ||
            take_str(&c, IMG_NAME_MAX, &r->name, &r->name_len) || r->name_len == 0 ||
            memchr(r->name, 0, r->name_len))
            return img_fail(err, MP_IMG_E_CORRUPT, "root table: entry %llu is malformed",
                            (unsigned long long)i);
        if (i > 0) {
            /* Strictly ascending: names are unique and the order is canonical. */
            const struct img_vroot *q = &v->roots[i - 1];
            size_t m = q->name_len < r->name_len ? q->name_len : r->name_len;
            int cmp = memcmp(q->name, r->name, m);
            if (cmp > 0 || (cmp == 0 && q->name_len >= r->name_len))
                return img_fail(err, MP_IMG_E_CORRUPT, "root table: entry %llu is out of order",
                                (unsigned long long)i);
        }
    }
    if (c.p != c.end)
        return img_fail(err, MP_IMG_E_CORRUPT, "root table: bytes left after %llu roots",
                        (unsigned long long)n);
    return MP_IMG_OK;
}

/* Says which type differs, for the digest refusal. */
static mp_img_status digest_mismatch(const struct img_view *v, const mp_img_registry *reg,
                                     int parsed, mp_img_error *err)
{
    const char *head = "header field 'type digest': the image's type table differs from the "
                       "registry's";
    if (v->hd.n_types != reg->n_types)
        return img_fail(err, MP_IMG_E_MISMATCH, "%s (%llu types, the registry has %zu)", head,
                        (unsigned long long)v->hd.n_types, reg->n_types);
    if (!parsed)
        return img_fail(err, MP_IMG_E_MISMATCH, "%s", head);
    for (size_t i = 0; i < reg->n_types; i++) {
        const struct img_vtype *a = &v->types[i];
        const mp_img_type *b = reg->types[i];
        if (a->name_len != b->name_len || memcmp(a->name, b->name, a->name_len) != 0)
            return img_fail(err, MP_IMG_E_MISMATCH,
                            "%s (type %zu is '%.*s' in the image, '%s' in the registry)", head, i,
                            (int)a->name_len, a->name, b->name);
        if (a->shape_class != b->shape_class || !img_shape_equal(&a->shape, &b->shape) ||
            a->policy != (unsigned)b->opts.foreign)
            return img_fail(err, MP_IMG_E_MISMATCH,
                            "%s (type %zu '%s' has another shape or foreign policy)", head, i,
                            b->name);
    }
    return img_fail(err, MP_IMG_E_MISMATCH, "%s", head);
}

mp_img_status img_view_open(struct img_view *v, const void *data, size_t len,
                            const mp_img_registry *reg, mp_img_error *err)
{
    memset(v, 0, sizeof *v);
    v->data = data;
    v->len = len;
    if (len < IMG_MAGIC_LEN || memcmp(data, IMG_MAGIC, IMG_MAGIC_LEN) != 0)
        return img_fail(err, MP_IMG_E_NOT_IMAGE, "header field 'magic': not an image");
    if (len < sizeof(struct img_header))
        return img_fail(err, MP_IMG_E_CORRUPT, "truncated: %zu bytes, the header alone is %zu", len,
                        sizeof(struct img_header));
    memcpy(&v->hd, data, sizeof v->hd);
    mp_img_status st = check_identity(v, reg, err);
    if (st != MP_IMG_OK)
        return st;
    size_t reg_size = 0;
    if (reg) {
        v->owned_types = img_type_table(reg, &reg_size);
        if (!v->owned_types)
            return img_fail(err, MP_IMG_E_NOMEM, "out of memory reading the registry");
        if (img_hash(v->owned_types, reg_size) != v->hd.type_digest) {
            /* Best effort at saying which type differs: the tables may be
             * damaged too, and then the sentence stays general. */
            int parsed = check_sizes(v, NULL) == MP_IMG_OK && parse_types(v, NULL) == MP_IMG_OK;
            return digest_mismatch(v, reg, parsed, err);
        }
    }
    if (v->hd.incomplete == IMG_INCOMPLETE)
        return img_fail(err, MP_IMG_E_INCOMPLETE,
                        "header field 'incomplete': the writer did not finish this image");
    if (v->hd.incomplete != 0)
        return img_fail(err, MP_IMG_E_CORRUPT, "header field 'incomplete' holds 0x%016llx",
                        (unsigned long long)v->hd.incomplete);
    if ((st = check_sizes(v, err)) != MP_IMG_OK)
        return st;
    /* The head checksum vouches for the header and the tables parsed
     * below; the checksum of the whole file is confirmed by the pass over
     * the object region (pass.c), which reads every byte once anyway. */
    if (img_hash(v->data + IMG_HEAD_FROM, (size_t)(v->objects_at - v->data) - IMG_HEAD_FROM) !=
        v->hd.head_checksum)
        return img_fail(err, MP_IMG_E_CHECKSUM,
                        "header field 'head checksum' does not match the header and tables");
    if ((st = parse_types(v, err)) != MP_IMG_OK)
        return st;
    if (reg && (reg_size != v->hd.types_size || memcmp(v->types_at, v->owned_types, reg_size) != 0))
        return digest_mismatch(v, reg, 1, err); /* same digest, different bytes */
    if ((st = parse_foreign(v, err)) != MP_IMG_OK || (st = parse_roots(v, err)) != MP_IMG_OK)
        return st;
    return MP_IMG_OK;
}

void img_view_close(struct img_view *v)
{
    free(v->types);
    free(v->foreign);
    free(v->roots);
    free(v->owned_types);
    memset(v, 0, sizeof *v);
}
