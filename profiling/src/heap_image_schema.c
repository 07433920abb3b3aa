/* SPDX-License-Identifier: MIT */
/* The heap-image schema's registry (heap_image_schema.h). */
#include "heap_image_schema.h"

#include <stddef.h>

static const struct {
    const char *name;
    const char *spelling;
    mp_img_foreign_policy foreign;
} SCHEMA_TYPES[MP_HIMG_T_COUNT] = {
    [MP_HIMG_T_STR] = {"mimprof.str", "word bytes", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_WORDS] = {"mimprof.words", "*: word", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_REFS] = {"mimprof.refs", "*: word ref", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_MAPPING] = {"mimprof.mapping", "ref ref ref word word", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_STACK] = {"mimprof.stack", "*: word word ref foreign", MP_IMG_FOREIGN_CODE},
    [MP_HIMG_T_LIVE] = {"mimprof.live", "ref ref", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_INTERVAL] = {"mimprof.interval", "ref word word word", MP_IMG_FOREIGN_NONE},
};

mp_img_status mp_himg_registry_new(mp_img_registry **out, mp_himg_types *types, mp_img_error *err)
{
    mp_img_registry *reg = NULL;
    mp_img_status st = mp_img_registry_new(0, &reg, err);
    for (int i = 0; st == MP_IMG_OK && i < MP_HIMG_T_COUNT; i++) {
        mp_img_type_options o = {
            .spelling = SCHEMA_TYPES[i].spelling,
            .foreign = SCHEMA_TYPES[i].foreign,
            .bytes_length = i == MP_HIMG_T_STR ? mp_img_bytes_prev_word : NULL,
        };
        st = mp_img_type_register(reg, SCHEMA_TYPES[i].name, &o, &types->t[i], err);
    }
    if (st != MP_IMG_OK) {
        mp_img_registry_free(reg);
        return st;
    }
    *out = reg;
    return MP_IMG_OK;
}
