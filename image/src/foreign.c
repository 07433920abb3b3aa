/* SPDX-License-Identifier: MIT */
/* The foreign vocabulary, both directions. It is closed: nil, dlsym(library,
 * symbol), fd(role), code(build-id, path, offset) and a type's own
 * externalise/internalise. The writer names a value only when the name
 * reacquires exactly that value; anything else is refused, never guessed. */
#define _GNU_SOURCE
#include "format.h"
#include "internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CODE_REC_MAGIC UINT64_C(0x45444F43474D494D) /* "MIMGCODE" */

struct img_namer {
    const mp_img_heap *heap; /* whose named code locations name themselves */
    struct mp_img_modules mods;
    int have_mods;
    void **owned; /* strings made while naming */
    size_t n_owned, cap_owned;
};

struct img_namer *img_namer_new(const mp_img_heap *heap)
{
    struct img_namer *nm = calloc(1, sizeof *nm);
    if (nm)
        nm->heap = heap;
    return nm;
}

/* The named code location `value` points at, if it is one of the heap's
 * (an image loaded where the module was absent, being written again). */
static const struct img_code_rec *own_code_rec(const mp_img_heap *h, uintptr_t value)
{
    if (!h || !h->n_codes)
        return NULL;
    uintptr_t lo = (uintptr_t)h->codes, hi = (uintptr_t)(h->codes + h->n_codes);
    if (value < lo || value >= hi || (value - lo) % sizeof *h->codes)
        return NULL;
    return (const struct img_code_rec *)value;
}

void img_namer_free(struct img_namer *nm)
{
    if (!nm)
        return;
    for (size_t i = 0; i < nm->n_owned; i++)
        free(nm->owned[i]);
    free(nm->owned);
    if (nm->have_mods)
        img_modules_free(&nm->mods);
    free(nm);
}

static int own(struct img_namer *nm, void *p)
{
    if (nm->n_owned == nm->cap_owned) {
        size_t cap = nm->cap_owned ? nm->cap_owned * 2 : 16;
        void **o = realloc(nm->owned, cap * sizeof *o);
        if (!o)
            return -1;
        nm->owned = o;
        nm->cap_owned = cap;
    }
    nm->owned[nm->n_owned++] = p;
    return 0;
}

static int is_std_stream(uintptr_t value, uint64_t *role)
{
    if (value == (uintptr_t)stdin)
        *role = 0;
    else if (value == (uintptr_t)stdout)
        *role = 1;
    else if (value == (uintptr_t)stderr)
        *role = 2;
    else
        return 0;
    return 1;
}

/* dlsym(library, symbol) for the exact start of an exported symbol, checked
 * by doing what the loader will do: look the name up and compare. */
static int name_symbol(uintptr_t value, struct img_foreign *out)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)value, &info, (void **)&lm, RTLD_DL_LINKMAP) || !info.dli_sname ||
        (uintptr_t)info.dli_saddr != value || !lm)
        return 0;
    const char *lib = lm->l_name ? lm->l_name : "";
    void *h = dlopen(lib[0] ? lib : NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    void *again = dlsym(h, info.dli_sname);
    dlclose(h);
    if ((uintptr_t)again != value)
        return 0;
    out->kind = IMG_FOREIGN_DLSYM;
    out->a = (const unsigned char *)lib;
    out->a_len = strlen(lib);
    out->b = (const unsigned char *)info.dli_sname;
    out->b_len = strlen(info.dli_sname);
    return 1;
}

static mp_img_status name_code(struct img_namer *nm, uintptr_t value, struct img_foreign *out,
                               const char **why)
{
    const struct img_code_rec *rec = own_code_rec(nm->heap, value);
    if (rec) {
        /* Still the same name: the location the image it came from held. */
        out->kind = IMG_FOREIGN_CODE;
        out->a = rec->build_id;
        out->a_len = rec->build_id_len;
        out->b = (const unsigned char *)rec->path;
        out->b_len = strlen(rec->path);
        out->n = rec->offset;
        return MP_IMG_OK;
    }
    if (!nm->have_mods) {
        if (img_modules_load(&nm->mods))
            return MP_IMG_E_NOMEM;
        nm->have_mods = 1;
    }
    const mp_img_module *m = mp_img_modules_find_addr(&nm->mods, value);
    if (!m) {
        *why = "no loaded module contains it";
        return MP_IMG_E_UNNAMEABLE;
    }
    if (m->build_id_len == 0) {
        *why = "the module containing it has no build-id";
        return MP_IMG_E_UNNAMEABLE;
    }
    out->kind = IMG_FOREIGN_CODE;
    out->a = m->build_id;
    out->a_len = m->build_id_len;
    out->b = (const unsigned char *)m->path;
    out->b_len = strlen(m->path);
    out->n = value - m->bias;
    return MP_IMG_OK;
}

static mp_img_status name_external(struct img_namer *nm, const mp_img_type *t, uintptr_t value,
                                   struct img_foreign *out, const char **why)
{
    size_t cap = 64;
    for (;;) {
        unsigned char *buf = malloc(cap);
        if (!buf || own(nm, buf)) {
            free(buf);
            return MP_IMG_E_NOMEM;
        }
        long n = t->opts.externalise(t->opts.ctx, value, buf, cap);
        if (n < 0) {
            *why = "the type's externalise callback refused it";
            return MP_IMG_E_UNNAMEABLE;
        }
        if ((unsigned long)n > IMG_STR_MAX) {
            *why = "the type's externalise callback gave a name longer than 1 MiB";
            return MP_IMG_E_UNNAMEABLE;
        }
        if ((size_t)n <= cap) {
            out->kind = IMG_FOREIGN_EXT;
            out->a = buf;
            out->a_len = (size_t)n;
            out->n = t->index;
            return MP_IMG_OK;
        }
        cap = (size_t)n;
    }
}

mp_img_status img_name_value(struct img_namer *nm, const mp_img_type *t, uintptr_t value,
                             struct img_foreign *out, const char **why)
{
    memset(out, 0, sizeof *out);
    out->kind = IMG_FOREIGN_NIL;
    switch (t->opts.foreign) {
    case MP_IMG_FOREIGN_DROP:
        return MP_IMG_OK; /* a transient: written as nil */
    case MP_IMG_FOREIGN_RESOLVE:
        if (value == 0)
            return MP_IMG_OK;
        if (is_std_stream(value, &out->n)) {
            out->kind = IMG_FOREIGN_FD;
            return MP_IMG_OK;
        }
        if (name_symbol(value, out))
            return MP_IMG_OK;
        *why = "it is not nil, a standard stream or the start of an exported symbol";
        return MP_IMG_E_UNNAMEABLE;
    case MP_IMG_FOREIGN_CODE:
        if (value == 0)
            return MP_IMG_OK;
        return name_code(nm, value, out, why);
    case MP_IMG_FOREIGN_CALLBACKS:
        return name_external(nm, t, value, out, why);
    case MP_IMG_FOREIGN_NONE:
    default:
        if (value == 0)
            return MP_IMG_OK;
        *why = "the type declares no foreign policy";
        return MP_IMG_E_UNNAMEABLE;
    }
}

/* ---- loader side ---------------------------------------------------- */

/* A NUL-terminated copy of a str from the image (which has no NUL of its
 * own); NULL if it holds a NUL byte (not a name) or memory is short. */
static char *cstr(const unsigned char *p, size_t len)
{
    if (memchr(p, 0, len))
        return NULL;
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, p, len);
        s[len] = '\0';
    }
    return s;
}

static mp_img_status resolve_dlsym(mp_img_heap *h, const struct img_foreign *f, size_t index,
                                   uintptr_t *value, mp_img_error *err)
{
    char *lib = cstr(f->a, f->a_len), *sym = cstr(f->b, f->b_len);
    mp_img_status st = MP_IMG_OK;
    if (!lib || !sym || f->b_len == 0) {
        st = img_fail(err, MP_IMG_E_CORRUPT, "foreign entry %zu: dlsym names are not strings",
                      index);
        goto out;
    }
    const char *why = NULL;
    void *handle = img_heap_library(h, lib, &why);
    if (!handle) {
        st = img_fail(err, MP_IMG_E_FOREIGN, "foreign entry %zu: dlsym(%s, %s): %s", index,
                      lib[0] ? lib : "<main program>", sym, why);
        goto out;
    }
    dlerror();
    void *p = dlsym(handle, sym);
    if (!p) {
        const char *e = dlerror();
        st = img_fail(err, MP_IMG_E_FOREIGN, "foreign entry %zu: dlsym(%s, %s): %s", index,
                      lib[0] ? lib : "<main program>", sym, e ? e : "symbol is NULL");
        goto out;
    }
    *value = (uintptr_t)p;
out:
    free(lib);
    free(sym);
    return st;
}

static mp_img_status resolve_code(mp_img_heap *h, const struct img_foreign *f, size_t index,
                                  uintptr_t *value, const struct mp_img_modules *mods,
                                  mp_img_error *err)
{
    const mp_img_module *m = mp_img_modules_find_build_id(mods, f->a, f->a_len);
    if (m) {
        uintptr_t addr = m->bias + (uintptr_t)f->n;
        if (addr < m->lo || addr >= m->hi)
            return img_fail(err, MP_IMG_E_FOREIGN,
                            "foreign entry %zu: code offset 0x%lx lies outside module %s", index,
                            (unsigned long)f->n, m->path);
        *value = addr;
        return MP_IMG_OK;
    }
    /* Absent module: the unit holds a named location the caller can read. */
    struct img_code_rec *rec = &h->codes[h->n_codes];
    memset(rec, 0, sizeof *rec);
    rec->magic = CODE_REC_MAGIC;
    rec->build_id = malloc(f->a_len ? f->a_len : 1);
    rec->path = malloc(f->b_len + 1);
    if (!rec->build_id || !rec->path) {
        free(rec->build_id);
        free(rec->path);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory naming code entry %zu", index);
    }
    memcpy(rec->build_id, f->a, f->a_len);
    rec->build_id_len = f->a_len;
    memcpy(rec->path, f->b, f->b_len);
    rec->path[f->b_len] = '\0';
    rec->offset = (uintptr_t)f->n;
    h->n_codes++;
    *value = (uintptr_t)rec;
    return MP_IMG_OK;
}

mp_img_status img_resolve(mp_img_heap *h, const struct img_foreign *f, size_t index,
                          uintptr_t *value, const struct mp_img_modules *mods, mp_img_error *err)
{
    *value = 0;
    switch (f->kind) {
    case IMG_FOREIGN_DLSYM:
        return resolve_dlsym(h, f, index, value, err);
    case IMG_FOREIGN_FD:
        if (f->n > 2)
            return img_fail(err, MP_IMG_E_CORRUPT, "foreign entry %zu: fd role %lu", index,
                            (unsigned long)f->n);
        *value = (uintptr_t)(f->n == 0 ? stdin : f->n == 1 ? stdout : stderr);
        return MP_IMG_OK;
    case IMG_FOREIGN_CODE:
        return resolve_code(h, f, index, value, mods, err);
    case IMG_FOREIGN_EXT: {
        /* The type table matched the registry, so index n is the type. */
        const mp_img_type *t = h->reg->types[f->n];
        if (t->opts.foreign != MP_IMG_FOREIGN_CALLBACKS)
            return img_fail(err, MP_IMG_E_CORRUPT,
                            "foreign entry %zu names type '%s', which has no internalise", index,
                            t->name);
        if (!t->opts.internalise(t->opts.ctx, f->a, f->a_len, value))
            return img_fail(err, MP_IMG_E_FOREIGN,
                            "foreign entry %zu: type '%s' could not internalise its name", index,
                            t->name);
        return MP_IMG_OK;
    }
    default:
        return img_fail(err, MP_IMG_E_CORRUPT, "foreign entry %zu has unknown kind %u", index,
                        f->kind);
    }
}

bool mp_img_code_lookup(const mp_img_heap *h, uintptr_t value, mp_img_code *out)
{
    const struct img_code_rec *rec = own_code_rec(h, value);
    if (rec) {
        if (out)
            *out = (mp_img_code){rec->build_id, rec->build_id_len, rec->path, rec->offset, 0};
        return true;
    }
    struct mp_img_modules mods;
    if (img_modules_load(&mods))
        return false;
    const mp_img_module *m = mp_img_modules_find_addr(&mods, value);
    if (m && out)
        *out = (mp_img_code){m->build_id, m->build_id_len, m->path, value - m->bias, value};
    img_modules_free(&mods);
    return m != NULL;
}
