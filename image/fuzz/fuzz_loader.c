/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the loader. Every input goes through the loader
 * (with the fixture registry, so that images of the fixture types reach the
 * foreign resolution, allocation and patch passes; once allowing every
 * foreign kind, once refusing dlsym entries as the profiler's heap-image
 * reader does) and through the registry-free verifier; then the same bytes again with the checksum
 * made valid and the incomplete marker cleared, so that mutations get past the checksum into the
 * tables and units. A loaded heap is traced and freed. No input may crash, leak or hang it. */
#include "fixture.h"

#include "view.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct fx f, nodl; /* nodl: the same types, dlsym entries refused */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fx_init(&f, 0);
    fx_init(&nodl, 0);
    if (mp_img_registry_allow_foreign(nodl.reg, MP_IMG_ALLOW_ALL & ~MP_IMG_ALLOW_DLSYM, NULL) !=
        MP_IMG_OK)
        abort();
    return 0;
}

static void load(mp_img_registry *reg, const uint8_t *data, size_t size)
{
    mp_img_heap *h = NULL;
    mp_img_error err;
    if (mp_img_load_memory(reg, data, size, &h, &err) == MP_IMG_OK) {
        size_t n;
        mp_img_heap_reachable(h, &n, &err);
        for (size_t r = 0; r < mp_img_root_count(h); r++) {
            void *obj;
            mp_img_root_at(h, r, &obj);
            if (obj)
                (void)mp_img_type_of(h, obj);
        }
        mp_img_heap_free(h);
    }
}

static void one(const uint8_t *data, size_t size)
{
    load(f.reg, data, size);
    load(nodl.reg, data, size);
    mp_img_error err;
    struct img_view v;
    if (img_view_open(&v, data, size, NULL, &err) == MP_IMG_OK)
        img_view_check_objects(&v, &err);
    img_view_close(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    if (size >= sizeof(struct img_header)) {
        uint8_t *copy = malloc(size);
        memcpy(copy, data, size);
        memset(copy + offsetof(struct img_header, incomplete), 0, 8);
        fx_fix_checksum(copy, size);
        one(copy, size);
        free(copy);
    }
    return 0;
}
