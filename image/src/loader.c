/* SPDX-License-Identifier: MIT */
/* The loader: verify and arm (view.c), resolve foreign, allocate, then one
 * pass over the object region that copies it into the heap, relocating
 * every unit by its kind, and hashes the file as it goes (the fast fill,
 * fill.c, or the careful pass, pass.c, with the types' plans of plan.c);
 * then the roots. Image files are read by file.c.
 *
 * Order is the contract: nothing is allocated before every header field,
 * the sizes, the head checksum and the tables have passed; every foreign
 * entry is reacquired before the heap memory is allocated. The region is
 * the heap's own layout (metadata, header word, units per object; a run
 * stores the header word once for all its objects, and an all-reference
 * run its units in 32 bits), so the pass is a copy in which every header
 * word is checked against the type table and every unit is range-checked
 * before it is used; a reference is
 * a word offset into the region, and must name the unit 0 of an object of
 * the region (checked in bulk at the end: one bit per word a reference
 * names, one per object start). Identity comes from the offsets: one
 * offset is one address, however many units name it. The checksum of the
 * whole file is confirmed before the heap is handed out, and if the file
 * is damaged the checksum refusal takes precedence over whatever else the
 * pass found. */
#define _GNU_SOURCE
#include "pass.h"

#include <stdlib.h>
#include <string.h>

/* Resolve foreign: every entry reacquired by name, before any object. The
 * `code` entries come last, against the modules loaded by then (including
 * any a dlsym entry just opened), so the result does not depend on the
 * order of the table.
 *
 * An entry of a kind the registry refuses (mp_img_registry_allow_foreign),
 * named in the detail; checked for the whole table before any entry is
 * reacquired, so a refused image opens no library. */
static mp_img_status refuse_foreign(const mp_img_registry *reg, const struct img_view *v,
                                    mp_img_error *err)
{
    static const char *const kind_name[] = {"nil", "dlsym", "fd", "code", "callback"};
    for (uint64_t k = 0; k < v->hd.n_foreign; k++) {
        const struct img_foreign *f = &v->foreign[k];
        if (f->kind > IMG_FOREIGN_EXT || !(reg->refused_foreign & (1u << f->kind)))
            continue;
        if (f->kind == IMG_FOREIGN_DLSYM) {
            const char *lib = f->a_len ? (const char *)f->a : "<main program>";
            int la = f->a_len ? (f->a_len > 200 ? 200 : (int)f->a_len) : (int)strlen(lib);
            int lb = f->b_len > 200 ? 200 : (int)f->b_len;
            return img_fail(err, MP_IMG_E_FOREIGN,
                            "foreign entry %llu is dlsym(%.*s, %.*s): this loader does not allow "
                            "dlsym entries (loading it would open that library)",
                            (unsigned long long)k + 1, la, lib, lb, (const char *)f->b);
        }
        return img_fail(err, MP_IMG_E_FOREIGN,
                        "foreign entry %llu is of kind %s, which this loader does not allow",
                        (unsigned long long)k + 1, kind_name[f->kind]);
    }
    return MP_IMG_OK;
}

static mp_img_status resolve_all(mp_img_heap *h, const struct img_view *v, uintptr_t *fvals,
                                 mp_img_error *err)
{
    mp_img_status st = refuse_foreign(h->reg, v, err);
    fvals[0] = 0;
    if (st != MP_IMG_OK)
        return st;
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind != IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], NULL, err);
    if (st != MP_IMG_OK || v->n_code == 0)
        return st;
    struct mp_img_modules mods = {0};
    if (img_modules_load(&mods))
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory listing modules");
    if (!(h->codes = calloc(v->n_code, sizeof *h->codes))) {
        img_modules_free(&mods);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory naming code locations");
    }
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind == IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], &mods, err);
    img_modules_free(&mods);
    return st;
}

/* Allocate: one block for the region's copy with the byte blob after it,
 * owned by the heap as one chunk whose objects end where the blob begins.
 * The chunk's start bits and the pass's target bits go in the same block,
 * after the blob: fresh memory is zero, and a block of huge pages has its
 * last one zeroed in full anyway. */
static mp_img_status allocate(mp_img_heap *h, const struct img_view *v, struct pass *ps,
                              struct img_chunk **chunk, mp_img_error *err)
{
    *chunk = NULL;
    if (v->words == 0)
        return MP_IMG_OK; /* no objects: roots are all nil, no bytes unit */
    const size_t cap = (size_t)v->words * sizeof(mp_img_word);
    const size_t bits_at = cap + (size_t)img_pad8(v->hd.n_bytes);
    const size_t bits = ((size_t)(v->words + 63) / 64 + 1) * sizeof(uint64_t);
    const size_t size = img_big_size(bits_at + 2 * bits);
    int mapped;
    unsigned char *base = img_big_alloc_lazy(size, &mapped);
    if (!base)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    if (!mapped) /* from malloc: not zero */
        memset(base + bits_at, 0, 2 * bits);
    *chunk = img_heap_add_chunk(h, base, cap, size, mapped, NULL);
    if (!*chunk)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    (*chunk)->starts = (uint64_t *)(void *)(base + bits_at);
    (*chunk)->starts_in_base = 1;
    ps->base = (mp_img_word *)(void *)base;
    ps->starts = (*chunk)->starts;
    ps->targets = (uint64_t *)(void *)(base + bits_at + bits);
    ps->targets_in_heap = 1;
    ps->blob = v->hd.n_bytes ? base + cap : NULL;
    return MP_IMG_OK;
}

static mp_img_status install_roots(mp_img_heap *h, const struct img_view *v,
                                   const mp_img_word *base, mp_img_error *err)
{
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        char name[IMG_NAME_MAX + 1];
        memcpy(name, v->roots[r].name, v->roots[r].name_len);
        name[v->roots[r].name_len] = '\0';
        uint64_t x = v->roots[r].index;
        mp_img_status st = mp_img_root_set(h, name, x ? (void *)(base + x) : NULL, err);
        if (st != MP_IMG_OK)
            return st;
    }
    return MP_IMG_OK;
}

static mp_img_status load_view(mp_img_registry *reg, struct img_view *v, mp_img_heap **out,
                               mp_img_error *err)
{
    mp_img_heap *h = NULL;
    mp_img_status st = mp_img_heap_new(reg, &h, err);
    if (st != MP_IMG_OK)
        return st;
    struct pass ps;
    memset(&ps, 0, sizeof ps);
    uint64_t none = 0, no_targets = 0; /* the bits of an empty region */
    struct img_chunk *chunk = NULL;
    uintptr_t *fvals = malloc((v->hd.n_foreign + 1) * sizeof *fvals);
    if (!fvals)
        st = img_fail(err, MP_IMG_E_NOMEM, "out of memory loading %llu objects",
                      (unsigned long long)v->hd.n_objects);
    if (st == MP_IMG_OK)
        st = img_pass_begin(&ps, v, 0, err);
    if (st == MP_IMG_OK)
        st = resolve_all(h, v, fvals, err);
    if (st == MP_IMG_OK)
        st = allocate(h, v, &ps, &chunk, err);
    if (st == MP_IMG_OK && !chunk) { /* no objects: the pass still checks the rest */
        ps.starts = &none;
        ps.targets = &no_targets;
        ps.targets_in_heap = 1;
    }
    if (st == MP_IMG_OK) {
        ps.fvals = fvals;
        if (v->hd.meta_width == 0 && v->hd.shapes_size == 0) {
            /* The fast fill, and the careful pass to say what is wrong. */
            if (img_fast_fill(&ps) != 0) {
                st = img_view_check_objects(v, err);
                if (st == MP_IMG_OK)
                    st = img_fail(err, MP_IMG_E_CORRUPT, "the object region is not sound");
            }
        } else {
            st = img_pass_fill(&ps, err);
        }
    }
    if (st == MP_IMG_OK && chunk) {
        chunk->used = chunk->cap;
        chunk->objects = (size_t)v->hd.n_objects;
        h->count += (size_t)v->hd.n_objects;
    }
    if (st == MP_IMG_OK)
        st = install_roots(h, v, chunk ? (const mp_img_word *)chunk->base : NULL, err);
    img_pass_end(&ps);
    free(fvals);
    if (st != MP_IMG_OK) {
        mp_img_heap_free(h);
        return st;
    }
    *out = h;
    return img_ok(err);
}

mp_img_status mp_img_load_memory(mp_img_registry *reg, const void *data, size_t len,
                                 mp_img_heap **out, mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_E_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || (!data && len))
        return img_fail(err, MP_IMG_E_ARGUMENT, "registry and data must be given");
    struct img_view v;
    mp_img_status st = img_view_open(&v, data ? data : "", len, reg, err);
    if (st == MP_IMG_OK)
        st = load_view(reg, &v, out, err);
    img_view_close(&v);
    return st;
}
