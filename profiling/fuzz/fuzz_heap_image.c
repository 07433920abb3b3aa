/* SPDX-License-Identifier: MIT */
/* libFuzzer target: reading heap images (src/heap_image_read.c) and
 * turning them into pprof (src/heap_image_pprof.c, symbolize none).
 *
 * The first byte picks a mode:
 *
 *   even  the rest is a file: mp_himg_load_memory() (the foreign-table
 *         pre-check, the image loader, the schema check); seeds are real
 *         heap images, most mutations are refused by the image's checksums;
 *   odd   the rest is a program that builds a heap of the schema's types
 *         with the image API, keeping what the loader guarantees of every
 *         loaded heap (a ref unit holds an object of the heap or NULL, a
 *         bytes unit NULL or NUL-terminated bytes, a dynamic object's
 *         unit 0 its count) and nothing else; mp_himg_from_heap() must
 *         refuse or accept it without reading out of bounds.
 *
 * Program: a sequence of ops.
 *   0..6 TYPE  allocate an object of schema type TYPE: [n] sets the unit
 *              count of a dynamic type (1 + n % 24); then one value per
 *              unit after a dynamic count, encoded [tag][payload]:
 *                tag 0  0
 *                tag 1  [b] small value b
 *                tag 2  [8 bytes] a word
 *                tag 3  [4 bytes LE] this module's load bias + value (addresses
 *                       and segment bounds that survive ASLR)
 *                tag 4  [b] the length of string b % 7 of the pool
 *              A ref unit takes pool[value % pool size] (or NULL when the
 *              value is 0 or the pool is empty); a bytes unit a string of
 *              a fixed pool (value % size), whose length word is free; a
 *              foreign unit the code address bias + value (tag 3), else NULL.
 *   7 R P      root name R % 9 = pool[P % pool size].
 * String pool: "", "0.1.0", this module's path, its build-id in hex, "ab",
 * "[vdso]", "/nonexistent/x".
 *
 * FUZZ_HEAP_IMAGE_VERBOSE=1 prints each input's verdict (corpus upkeep:
 * `fuzz-heap_image -runs=0 corpus/heap_image`). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/image.h>

#include "heap_image.h"
#include "report/elf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mp_img_registry *g_reg;
static mp_himg_types g_T;
static uintptr_t g_bias;
static char g_self_path[4096];
static char g_self_id[2 * MP_ELF_BUILD_ID_MAX + 1];
static const char *g_strs[7];
static bool g_verbose;

static void verdict(const char *mode, int rc, const char *err)
{
    if (g_verbose)
        fprintf(stderr, "%s: %s%s\n", mode, rc == 0 ? "accepted" : "refused: ", rc == 0 ? "" : err);
}

static void init(void)
{
    if (g_reg != NULL)
        return;
    if (mp_himg_registry_new(&g_reg, &g_T, NULL) != MP_IMG_OK)
        abort();
    const char *v = getenv("FUZZ_HEAP_IMAGE_VERBOSE");
    g_verbose = v != NULL && v[0] == '1';
    mp_img_code c;
    uintptr_t self = (uintptr_t)&LLVMFuzzerTestOneInput;
    if (mp_img_code_lookup(NULL, self, &c)) {
        g_bias = self - c.offset;
        snprintf(g_self_path, sizeof g_self_path, "%s", c.path);
        if (c.build_id_len <= MP_ELF_BUILD_ID_MAX)
            mp_elf_hex(c.build_id, c.build_id_len, g_self_id);
    }
    const char *strs[7] = {"", "0.1.0", g_self_path, g_self_id, "ab", "[vdso]", "/nonexistent/x"};
    memcpy(g_strs, strs, sizeof strs);
}

typedef struct prog {
    const uint8_t *p;
    size_t n;
} prog;

static int byte(prog *g)
{
    if (g->n == 0)
        return -1;
    g->n--;
    return *g->p++;
}

static uint64_t value(prog *g, int *tag)
{
    *tag = byte(g);
    uint64_t v = 0;
    switch (*tag) {
    case 1: {
        int b = byte(g);
        return b < 0 ? 0 : (uint64_t)b;
    }
    case 2:
        for (int i = 0; i < 8; i++) {
            int b = byte(g);
            v |= (uint64_t)(b < 0 ? 0 : b) << (8 * i);
        }
        return v;
    case 3:
        for (int i = 0; i < 4; i++) {
            int b = byte(g);
            v |= (uint64_t)(b < 0 ? 0 : b) << (8 * i);
        }
        return g_bias + v;
    case 4: {
        int b = byte(g);
        return strlen(g_strs[(b < 0 ? 0 : b) % 7]);
    }
    default:
        return 0;
    }
}

enum { POOL = 256 };
static const char *const ROOTS[9] = {
    MP_HIMG_ROOT_META,     MP_HIMG_ROOT_VERSION,  MP_HIMG_ROOT_CONFIG,
    MP_HIMG_ROOT_COUNTERS, MP_HIMG_ROOT_MAPPINGS, MP_HIMG_ROOT_LIVE,
    MP_HIMG_ROOT_INTERVAL, MP_HIMG_ROOT_PEAK,     MP_HIMG_ROOT_PEAK_META};

static void structured(const uint8_t *data, size_t size)
{
    mp_img_heap *h;
    if (mp_img_heap_new(g_reg, &h, NULL) != MP_IMG_OK)
        abort();
    void *pool[POOL];
    size_t npool = 0;
    prog g = {data, size};
    int op;
    while ((op = byte(&g)) >= 0) {
        op %= 8;
        if (op == 7) {
            int r = byte(&g), k = byte(&g);
            if (r < 0 || k < 0)
                break;
            void *o = npool ? pool[(size_t)k % npool] : NULL;
            mp_img_root_set(h, ROOTS[r % 9], o, NULL);
            continue;
        }
        const mp_img_type *t = g_T.t[op];
        mp_img_shape sh;
        if (!mp_img_type_shape(t, &sh))
            abort();
        size_t units = sh.count;
        if (sh.dynamic) {
            int n = byte(&g);
            units = 1 + (size_t)(n < 0 ? 0 : n % 24);
        }
        mp_img_word *o = mp_img_alloc(h, t, units);
        if (o == NULL)
            abort();
        for (size_t u = sh.dynamic ? 1 : 0; u < units; u++) {
            int tag;
            uint64_t v = value(&g, &tag);
            switch (mp_img_shape_kind(&sh, u)) {
            case MP_IMG_REF:
                o[u] = v == 0 || npool == 0 ? 0 : (mp_img_word)pool[v % npool];
                break;
            case MP_IMG_WORD:
                o[u] = (mp_img_word)v;
                break;
            case MP_IMG_BYTES:
                o[u] = tag == 0 ? 0 : (mp_img_word)g_strs[v % 7];
                break;
            case MP_IMG_FOREIGN:
                o[u] = tag == 3 ? (mp_img_word)v : 0;
                break;
            }
        }
        if (npool < POOL)
            pool[npool++] = o;
    }
    mp_himg *img = NULL;
    char err[512];
    int rc = mp_himg_from_heap(h, &g_T, &img, err, sizeof err);
    verdict("program", rc, err);
    if (rc == 0) {
        uint8_t *buf = NULL;
        size_t len = 0;
        mp_himg_pprof_opts o = {.symbolize = MP_PROF_SYMBOLIZE_NONE};
        if (mp_himg_pprof(img, &o, &buf, &len) == MP_PROF_OK && buf == NULL)
            abort();
        free(buf);
        mp_himg_free(img);
    } else if (img != NULL || err[0] == '\0') {
        abort(); /* a refusal leaves nothing behind and says why */
    }
    mp_img_heap_free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init();
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        structured(data + 1, size - 1);
        return 0;
    }
    mp_himg *img = NULL;
    char err[512];
    int rc = mp_himg_load_memory(data + 1, size - 1, &img, err, sizeof err);
    verdict("file", rc, err);
    if (rc == 0) {
        uint8_t *buf = NULL;
        size_t len = 0;
        mp_himg_pprof_opts o = {.symbolize = MP_PROF_SYMBOLIZE_NONE};
        if (mp_himg_pprof(img, &o, &buf, &len) == MP_PROF_OK)
            free(buf);
        mp_himg_free(img);
    } else if (img != NULL || err[0] == '\0') {
        abort();
    }
    return 0;
}
