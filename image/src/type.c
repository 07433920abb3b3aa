/* SPDX-License-Identifier: MIT */
/* The registry: types in registration order, their shapes and foreign
 * policies, and the type table the writer stores and the loader compares. */
#include "format.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

mp_img_status mp_img_registry_new(size_t meta_width, mp_img_registry **out, mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_E_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (meta_width > MP_IMG_META_MAX)
        return img_fail(err, MP_IMG_E_ARGUMENT, "metadata width %zu exceeds %d", meta_width,
                        MP_IMG_META_MAX);
    mp_img_registry *r = calloc(1, sizeof *r);
    if (!r)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory creating a registry");
    r->meta_width = meta_width;
    *out = r;
    return img_ok(err);
}

mp_img_status mp_img_registry_allow_foreign(mp_img_registry *reg, unsigned kinds, mp_img_error *err)
{
    if (!reg)
        return img_fail(err, MP_IMG_E_ARGUMENT, "registry must not be NULL");
    if (kinds & ~(unsigned)MP_IMG_ALLOW_ALL)
        return img_fail(err, MP_IMG_E_ARGUMENT, "foreign kinds 0x%x: unknown bits 0x%x", kinds,
                        kinds & ~(unsigned)MP_IMG_ALLOW_ALL);
    reg->refused_foreign = (unsigned)MP_IMG_ALLOW_ALL & ~kinds;
    return img_ok(err);
}

void mp_img_registry_free(mp_img_registry *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n_types; i++) {
        free(reg->types[i]->name);
        free(reg->types[i]);
    }
    free(reg->types);
    free(reg);
}

static int valid_name(const char *name, size_t *len)
{
    if (!name)
        return 0;
    *len = strlen(name);
    return *len >= 1 && *len <= IMG_NAME_MAX;
}

/* Resolves the options' shape declaration into class + canonical shape. */
static mp_img_status declared_shape(const char *name, const mp_img_type_options *o, unsigned *cls,
                                    mp_img_shape *shape, mp_img_error *err)
{
    int declared = (o->spelling != NULL) + (o->shape != NULL) + (o->shape_of != NULL);
    if (declared > 1)
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "type '%s' declares more than one of spelling, shape and shape_of", name);
    *cls = IMG_SHAPE_NONE;
    memset(shape, 0, sizeof *shape);
    if (o->shape_of) {
        *cls = IMG_SHAPE_CUSTOM;
        return MP_IMG_OK;
    }
    if (o->spelling) {
        mp_img_status st = mp_img_shape_parse(o->spelling, shape, err);
        if (st != MP_IMG_OK)
            return st;
    } else if (o->shape) {
        *shape = *o->shape;
        mp_img_status st = img_shape_check(shape, err);
        if (st != MP_IMG_OK)
            return st;
    } else {
        return MP_IMG_OK;
    }
    img_shape_canon(shape);
    *cls = shape->dynamic ? IMG_SHAPE_DYNAMIC : IMG_SHAPE_FIXED;
    return MP_IMG_OK;
}

mp_img_status mp_img_type_register(mp_img_registry *reg, const char *name,
                                   const mp_img_type_options *opts, const mp_img_type **out,
                                   mp_img_error *err)
{
    static const mp_img_type_options none;
    size_t len;
    if (out)
        *out = NULL;
    if (!reg)
        return img_fail(err, MP_IMG_E_ARGUMENT, "registry must not be NULL");
    if (!valid_name(name, &len))
        return img_fail(err, MP_IMG_E_ARGUMENT, "a type name is 1 to %u bytes", IMG_NAME_MAX);
    if (mp_img_type_find(reg, name))
        return img_fail(err, MP_IMG_E_ARGUMENT, "type '%s' is already registered", name);
    if (reg->n_types >= IMG_MAX_TYPES)
        return img_fail(err, MP_IMG_E_LIMIT, "a registry holds at most %u types", IMG_MAX_TYPES);
    const mp_img_type_options *o = opts ? opts : &none;
    unsigned cls = IMG_SHAPE_NONE;
    mp_img_shape shape = {0};
    mp_img_status st = declared_shape(name, o, &cls, &shape, err);
    if (st != MP_IMG_OK)
        return st;
    size_t span = shape.dynamic ? MP_IMG_MASK_UNITS + 1 : shape.count;
    if (cls != IMG_SHAPE_NONE && cls != IMG_SHAPE_CUSTOM &&
        img_shape_has_kind(&shape, span, MP_IMG_BYTES) && !o->bytes_length)
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "type '%s' has bytes units but no bytes_length function", name);
    if (o->foreign > MP_IMG_FOREIGN_CALLBACKS)
        return img_fail(err, MP_IMG_E_ARGUMENT, "type '%s': unknown foreign policy %d", name,
                        (int)o->foreign);
    if (o->foreign == MP_IMG_FOREIGN_CALLBACKS && (!o->externalise || !o->internalise))
        return img_fail(err, MP_IMG_E_ARGUMENT,
                        "type '%s' names foreign values by callbacks but lacks externalise or "
                        "internalise",
                        name);
    if (reg->n_types == reg->cap_types) {
        size_t cap = reg->cap_types ? reg->cap_types * 2 : 16;
        mp_img_type **types = realloc(reg->types, cap * sizeof *types);
        if (!types)
            return img_fail(err, MP_IMG_E_NOMEM, "out of memory registering '%s'", name);
        reg->types = types;
        reg->cap_types = cap;
    }
    mp_img_type *t = calloc(1, sizeof *t);
    char *copy = malloc(len + 1);
    if (!t || !copy) {
        free(t);
        free(copy);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory registering '%s'", name);
    }
    memcpy(copy, name, len + 1);
    t->name = copy;
    t->name_len = len;
    t->index = (uint32_t)reg->n_types;
    t->shape_class = cls;
    t->shape = shape;
    t->opts = *o;
    t->opts.spelling = NULL; /* not kept: the caller owns those */
    t->opts.shape = NULL;
    reg->types[reg->n_types++] = t;
    if (out)
        *out = t;
    return img_ok(err);
}

const mp_img_type *mp_img_type_find(const mp_img_registry *reg, const char *name)
{
    if (!reg || !name)
        return NULL;
    for (size_t i = 0; i < reg->n_types; i++)
        if (strcmp(reg->types[i]->name, name) == 0)
            return reg->types[i];
    return NULL;
}

const char *mp_img_type_name(const mp_img_type *type) { return type ? type->name : NULL; }

bool mp_img_type_shape(const mp_img_type *type, mp_img_shape *out)
{
    if (!type || (type->shape_class != IMG_SHAPE_FIXED && type->shape_class != IMG_SHAPE_DYNAMIC))
        return false;
    if (out)
        *out = type->shape;
    return true;
}

size_t mp_img_bytes_cstring(void *ctx, const mp_img_word *obj, size_t unit)
{
    (void)ctx;
    return strlen((const char *)obj[unit]) + 1;
}

size_t mp_img_bytes_prev_word(void *ctx, const mp_img_word *obj, size_t unit)
{
    (void)ctx;
    return unit == 0 ? SIZE_MAX : (size_t)obj[unit - 1];
}

/* One type-table entry (see format.h); the bytes the digest covers. */
static size_t entry_size(const mp_img_type *t) { return 8 + img_pad8(t->name_len) + 5 * 8; }

unsigned char *img_type_table(const mp_img_registry *reg, size_t *size)
{
    size_t total = 0;
    for (size_t i = 0; i < reg->n_types; i++)
        total += entry_size(reg->types[i]);
    unsigned char *buf = calloc(1, total ? total : 1);
    if (!buf)
        return NULL;
    unsigned char *p = buf;
    for (size_t i = 0; i < reg->n_types; i++) {
        const mp_img_type *t = reg->types[i];
        uint64_t w[5] = {t->shape_class, t->shape.count, t->shape.described, t->shape.mask,
                         (uint64_t)t->opts.foreign};
        uint64_t len = t->name_len;
        memcpy(p, &len, 8);
        memcpy(p + 8, t->name, t->name_len);
        p += 8 + img_pad8(t->name_len);
        memcpy(p, w, sizeof w);
        p += sizeof w;
    }
    *size = total;
    return buf;
}
