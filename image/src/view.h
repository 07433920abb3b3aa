/* A verified view of an image in memory: the header checked field by field,
 * the sections located, the head checksum confirmed and the small tables
 * (types, foreign entries, roots) parsed and checked. The pass over the
 * object region (loader.c), which also confirms the checksum of the whole
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
    uint64_t words; /* of the object region */
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
 * the checksum of the whole file (loader.c). */
mp_img_status img_view_check_objects(const struct img_view *v, mp_img_error *err);

/* Reads a native word at any alignment. */
static inline uint64_t img_rd64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* A header text field as a C string (fields are NUL-padded; a field without
 * a NUL is cut at 15 bytes). */
void img_text_field(const char field[IMG_TEXT_FIELD], char out[IMG_TEXT_FIELD]);

#endif /* MP_IMG_VIEW_H */
