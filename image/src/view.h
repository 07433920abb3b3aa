/* SPDX-License-Identifier: MIT */
/* A verified view of an image in memory: the header checked field by field,
 * the sections located, the head checksum confirmed and the small tables
 * (types, foreign entries, roots) parsed and checked. The pass over the
 * object region (pass.c), which also confirms the checksum of the whole
 * file, follows. */
#ifndef MP_IMG_VIEW_H
#define MP_IMG_VIEW_H

#include "format.h"
#include "internal.h"

#include <string.h>

struct img_vtype {
    const unsigned char *name;
    size_t name_len;
    unsigned shape_class;
    mp_img_shape shape;
    unsigned policy;
};

struct img_vroot {
    uint64_t index; /* word offset of its unit 0 in the region, 0 = nil */
    const unsigned char *name;
    size_t name_len;
};

struct img_view {
    struct img_header hd; /* aligned copy */
    const unsigned char *data;
    size_t len;
    const unsigned char *types_at, *foreign_at, *roots_at, *objects_at, *shapes_at, *blob_at;
    uint64_t words;      /* of the object region in memory (references count in these) */
    uint64_t file_words; /* of the object region in the file (runs store fewer) */
    struct img_vtype *types;
    struct img_foreign *foreign; /* foreign[k] is entry k + 1 */
    struct img_vroot *roots;
    size_t n_code;              /* entries of kind CODE */
    unsigned char *owned_types; /* registry's own table, for the comparison */
};

/* What img_view_open() checks against: the loading registry, or NULL to
 * check only what does not depend on one (verify). */
mp_img_status img_view_open(struct img_view *v, const void *data, size_t len,
                            const mp_img_registry *reg, mp_img_error *err);
void img_view_close(struct img_view *v);

/* The pass over the object region without a heap: every object's header
 * word, shape and units checked against the image's own tables, every
 * reference against the objects the region holds, the roots likewise, and
 * the checksum of the whole file (pass.c). */
mp_img_status img_view_check_objects(const struct img_view *v, mp_img_error *err);

/* Reads a native word at any alignment. */
static inline uint64_t img_rd64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Reads a native 32-bit word at any alignment (a packed run's unit). */
static inline uint64_t img_rd32(const unsigned char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* A run of n objects of `units` units each: whether its units are packed
 * (32 bits each: a type whose units are all references) and how many file
 * words they take (packed: padded to a word). */
static inline bool img_run_packed(const struct img_vtype *t) { return t->shape.mask == 0; }
static inline uint64_t img_run_words(bool packed, uint64_t n, uint64_t units)
{
    return packed ? (n * units + 1) / 2 : n * units;
}

/* The objects of a region that passed img_view_check_objects(), in region
 * order: runs expanded, each object's header word and where its units are
 * (in the file, 64 or, in a packed run, 32 bits each; and its unit 0 in
 * memory). */
struct img_walk {
    const struct img_view *v;
    uint64_t f;                    /* file word of the next header */
    uint64_t p;                    /* memory word of the next object's first word */
    uint64_t run_left;             /* objects of the current run not yet returned */
    uint64_t run_h;                /* their header word */
    const unsigned char *run_next; /* the units of the next one */
    bool packed;                   /* the last object returned is in a packed run */
};

static inline void img_walk_init(struct img_walk *it, const struct img_view *v)
{
    memset(it, 0, sizeof *it);
    it->v = v;
}

/* The next object: its header word (without the run mark), the memory word
 * of its unit 0, its units in the file (it->packed says their width). False
 * at the end. */
static inline bool img_walk_next(struct img_walk *it, struct img_obj *o, uint64_t *at,
                                 const unsigned char **units)
{
    const struct img_view *v = it->v;
    const uint64_t w = v->hd.meta_width;
    if (it->run_left) {
        memcpy(o, &it->run_h, sizeof *o);
        it->run_left--;
    } else {
        if (it->f >= v->file_words)
            return false;
        uint64_t h = img_rd64(v->objects_at + 8 * (it->f + w));
        memcpy(o, &h, sizeof *o);
        it->f += w + 1;
        it->packed = false;
        if (o->flags & IMG_RUN) {
            o->flags &= (uint16_t)~IMG_RUN;
            memcpy(&it->run_h, o, sizeof *o);
            const uint64_t n = img_rd64(v->objects_at + 8 * it->f++);
            it->run_left = n - 1;
            it->packed = img_run_packed(&v->types[o->type]);
            it->run_next = v->objects_at + 8 * it->f;
            it->f += img_run_words(it->packed, n, o->units);
        } else {
            it->run_next = v->objects_at + 8 * it->f;
            it->f += o->units;
        }
    }
    *units = it->run_next;
    it->run_next += (it->packed ? 4 : 8) * (uint64_t)o->units;
    *at = it->p + w + 1;
    it->p = *at + o->units;
    return true;
}

/* A header text field as a C string (fields are NUL-padded; a field without
 * a NUL is cut at 15 bytes). */
void img_text_field(const char field[IMG_TEXT_FIELD], char out[IMG_TEXT_FIELD]);

#endif /* MP_IMG_VIEW_H */
