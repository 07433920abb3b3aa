/* SPDX-License-Identifier: MIT */
/* The heap: objects in chunks (the chain, in allocation order), an exact
 * membership test, and named roots. Objects are never freed one by one; a
 * heap is a region that lives until mp_img_heap_free(). */
#define _GNU_SOURCE
#include "format.h"
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN ((size_t)256 << 10)
#define CHUNK_MAX ((size_t)8 << 20)

mp_img_status mp_img_heap_new(mp_img_registry *reg, mp_img_heap **out, mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_E_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg)
        return img_fail(err, MP_IMG_E_ARGUMENT, "registry must not be NULL");
    mp_img_heap *h = calloc(1, sizeof *h);
    if (!h)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory creating a heap");
    h->reg = reg;
    h->meta_width = reg->meta_width;
    *out = h;
    return img_ok(err);
}

void mp_img_heap_free(mp_img_heap *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_chunks; i++) {
        if (!h->chunks[i].starts_in_base)
            free(h->chunks[i].starts);
        img_big_free(h->chunks[i].base, h->chunks[i].size, h->chunks[i].mapped);
    }
    free(h->chunks);
    free(h->by_addr);
    for (size_t i = 0; i < h->n_roots; i++)
        free(h->roots[i].name);
    free(h->roots);
    for (size_t i = 0; i < h->n_blocks; i++)
        free(h->blocks[i]);
    free(h->blocks);
    for (size_t i = 0; i < h->n_codes; i++) {
        free(h->codes[i].build_id);
        free(h->codes[i].path);
    }
    free(h->codes);
    /* Handles last: nothing above lives in the libraries, but objects that
     * held their addresses are gone by now. */
    for (size_t i = h->n_handles; i > 0; i--) {
        dlclose(h->handles[i - 1].handle);
        free(h->handles[i - 1].library);
    }
    free(h->handles);
    free(h);
}

mp_img_registry *mp_img_heap_registry(const mp_img_heap *h) { return h ? h->reg : NULL; }

struct img_chunk *img_heap_add_chunk(mp_img_heap *h, void *base, size_t cap, size_t size,
                                     int mapped, uint64_t *starts)
{
    if (h->n_chunks == h->cap_chunks) {
        /* Both arrays grow together; cap_chunks moves only when both did. */
        size_t n = h->cap_chunks ? h->cap_chunks * 2 : 8;
        struct img_chunk *cs = realloc(h->chunks, n * sizeof *cs);
        size_t *b = cs ? realloc(h->by_addr, n * sizeof *b) : NULL;
        if (cs)
            h->chunks = cs;
        if (!b) {
            img_big_free(base, size, mapped);
            free(starts);
            return NULL;
        }
        h->by_addr = b;
        h->cap_chunks = n;
    }
    struct img_chunk c = {0};
    c.base = base;
    c.cap = cap;
    c.size = size;
    c.mapped = mapped;
    c.starts = starts;
    size_t idx = h->n_chunks++;
    h->chunks[idx] = c;
    /* Insertion into the address order. */
    size_t pos = idx;
    while (pos > 0 && h->chunks[h->by_addr[pos - 1]].base > c.base) {
        h->by_addr[pos] = h->by_addr[pos - 1];
        pos--;
    }
    h->by_addr[pos] = idx;
    return &h->chunks[idx];
}

/* Adds a chunk of at least `bytes`. */
static struct img_chunk *add_chunk(mp_img_heap *h, size_t bytes)
{
    size_t cap = h->n_chunks ? h->chunks[h->n_chunks - 1].cap * 2 : CHUNK_MIN;
    if (cap > CHUNK_MAX)
        cap = CHUNK_MAX;
    if (cap < bytes)
        cap = bytes;
    int mapped;
    void *base = img_big_alloc(cap, &mapped);
    uint64_t *starts = calloc((cap / sizeof(mp_img_word) + 63) / 64, sizeof(uint64_t));
    if (!base || !starts) {
        if (base)
            img_big_free(base, cap, mapped);
        free(starts);
        return NULL;
    }
    return img_heap_add_chunk(h, base, cap, cap, mapped, starts);
}

void *img_alloc_slow(mp_img_heap *h, uint32_t type, size_t units)
{
    if (units > IMG_MAX_UNITS || units > (SIZE_MAX / sizeof(mp_img_word)) - h->meta_width - 1) {
        errno = ENOMEM;
        return NULL;
    }
    size_t size = img_obj_size(h->meta_width, units);
    struct img_chunk *c = h->n_chunks ? &h->chunks[h->n_chunks - 1] : NULL;
    if (!c || c->cap - c->used < size) {
        if (!add_chunk(h, size)) {
            errno = ENOMEM;
            return NULL;
        }
    }
    return img_alloc_raw(h, type, units);
}

void *mp_img_alloc(mp_img_heap *h, const mp_img_type *type, size_t units)
{
    if (!h || !type || type->index >= h->reg->n_types || h->reg->types[type->index] != type) {
        errno = EINVAL;
        return NULL;
    }
    if ((type->shape_class == IMG_SHAPE_FIXED && units != type->shape.count) ||
        (type->shape_class == IMG_SHAPE_DYNAMIC && units < 1)) {
        errno = EINVAL;
        return NULL;
    }
    mp_img_word *obj = img_alloc_raw(h, type->index, units);
    if (!obj)
        return NULL;
    memset((mp_img_word *)obj - 1 - h->meta_width, 0, h->meta_width * sizeof(mp_img_word));
    memset(obj, 0, units * sizeof(mp_img_word));
    if (type->shape_class == IMG_SHAPE_DYNAMIC)
        obj[0] = units - 1; /* the slot-0 count */
    return obj;
}

const mp_img_type *mp_img_type_of(const mp_img_heap *h, const void *obj)
{
    uint32_t t = img_hdr(obj)->type;
    return t < h->reg->n_types ? h->reg->types[t] : NULL;
}

size_t mp_img_units(const void *obj) { return img_hdr(obj)->units; }

unsigned mp_img_flags(const void *obj) { return img_hdr(obj)->flags & MP_IMG_USER_FLAGS; }

void mp_img_set_flags(void *obj, unsigned flags)
{
    struct img_obj *o = img_hdr(obj);
    o->flags = (o->flags & ~MP_IMG_USER_FLAGS) | (flags & MP_IMG_USER_FLAGS);
}

mp_img_word *mp_img_meta(const mp_img_heap *h, void *obj)
{
    if (h->meta_width == 0)
        return NULL;
    return (mp_img_word *)img_hdr(obj) - h->meta_width;
}

size_t mp_img_heap_count(const mp_img_heap *h) { return h ? h->count : 0; }

bool img_heap_locate(const mp_img_heap *h, const void *p, size_t *chunk, size_t *word)
{
    if (!p || h->n_chunks == 0)
        return false;
    const unsigned char *a = p;
    const struct img_chunk *c = &h->chunks[h->last_chunk];
    if (a < c->base || a >= c->base + c->used) {
        /* Binary search for the last chunk whose base is <= a. */
        size_t lo = 0, hi = h->n_chunks;
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->chunks[h->by_addr[mid]].base <= a)
                lo = mid;
            else
                hi = mid;
        }
        c = &h->chunks[h->by_addr[lo]];
        if (a < c->base || a >= c->base + c->used)
            return false;
        ((mp_img_heap *)h)->last_chunk = (size_t)(c - h->chunks); /* a cache, not state */
    }
    size_t off = (size_t)(a - c->base);
    if (off % sizeof(mp_img_word))
        return false;
    size_t w = off / sizeof(mp_img_word);
    if (!((c->starts[w / 64] >> (w % 64)) & 1))
        return false;
    *chunk = (size_t)(c - h->chunks);
    *word = w;
    return true;
}

bool mp_img_heap_contains(const mp_img_heap *h, const void *p)
{
    size_t chunk, word;
    return h && img_heap_locate(h, p, &chunk, &word);
}

void img_chain_walk(const mp_img_heap *h, void (*fn)(void *obj, void *ctx), void *ctx)
{
    size_t skip = (h->meta_width + 1) * sizeof(mp_img_word);
    for (size_t i = 0; i < h->n_chunks; i++) {
        const struct img_chunk *c = &h->chunks[i];
        for (size_t off = 0; off < c->used;) {
            void *obj = c->base + off + skip;
            size_t units = img_hdr(obj)->units;
            fn(obj, ctx);
            off += img_obj_size(h->meta_width, units);
        }
    }
}

int img_heap_own_block(mp_img_heap *h, void *block)
{
    if (img_grow((void **)&h->blocks, &h->cap_blocks, h->n_blocks + 1, sizeof *h->blocks))
        return -1;
    h->blocks[h->n_blocks++] = block;
    return 0;
}

void *img_heap_library(mp_img_heap *h, const char *library, const char **why)
{
    for (size_t i = 0; i < h->n_handles; i++)
        if (strcmp(h->handles[i].library, library) == 0)
            return h->handles[i].handle;
    size_t len = strlen(library);
    char *copy = malloc(len + 1);
    if (!copy ||
        img_grow((void **)&h->handles, &h->cap_handles, h->n_handles + 1, sizeof *h->handles)) {
        free(copy);
        *why = "out of memory";
        return NULL;
    }
    memcpy(copy, library, len + 1);
    void *handle = dlopen(len ? library : NULL, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *e = dlerror();
        *why = e ? e : "dlopen failed";
        free(copy);
        return NULL;
    }
    h->handles[h->n_handles].library = copy;
    h->handles[h->n_handles].handle = handle;
    h->n_handles++;
    return handle;
}

/* ---- roots: kept sorted by name (the order the image stores) ---- */

static size_t root_pos(const mp_img_heap *h, const char *name, int *found)
{
    size_t lo = 0, hi = h->n_roots;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(h->roots[mid].name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

mp_img_status mp_img_root_set(mp_img_heap *h, const char *name, void *obj, mp_img_error *err)
{
    if (!h || !name)
        return img_fail(err, MP_IMG_E_ARGUMENT, "heap and name must not be NULL");
    size_t len = strlen(name);
    if (len < 1 || len > IMG_NAME_MAX)
        return img_fail(err, MP_IMG_E_ARGUMENT, "a root name is 1 to %u bytes", IMG_NAME_MAX);
    int found;
    size_t pos = root_pos(h, name, &found);
    if (found) {
        h->roots[pos].obj = obj;
        return img_ok(err);
    }
    char *copy = malloc(len + 1);
    if (!copy || img_grow((void **)&h->roots, &h->cap_roots, h->n_roots + 1, sizeof *h->roots)) {
        free(copy);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory naming root '%s'", name);
    }
    memcpy(copy, name, len + 1);
    memmove(&h->roots[pos + 1], &h->roots[pos], (h->n_roots - pos) * sizeof *h->roots);
    h->roots[pos].name = copy;
    h->roots[pos].obj = obj;
    h->n_roots++;
    return img_ok(err);
}

bool mp_img_root_find(const mp_img_heap *h, const char *name, void **obj)
{
    if (!h || !name)
        return false;
    int found;
    size_t pos = root_pos(h, name, &found);
    if (found && obj)
        *obj = h->roots[pos].obj;
    return found;
}

void *mp_img_root_get(const mp_img_heap *h, const char *name)
{
    void *obj = NULL;
    return mp_img_root_find(h, name, &obj) ? obj : NULL;
}

size_t mp_img_root_count(const mp_img_heap *h) { return h ? h->n_roots : 0; }

const char *mp_img_root_at(const mp_img_heap *h, size_t i, void **obj)
{
    if (!h || i >= h->n_roots)
        return NULL;
    if (obj)
        *obj = h->roots[i].obj;
    return h->roots[i].name;
}
