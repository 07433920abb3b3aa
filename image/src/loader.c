/* The loader: verify and arm (view.c), resolve foreign, allocate, patch.
 *
 * Order is the contract: nothing is allocated before every header field,
 * the sizes, the checksum and the tables have passed; every foreign entry
 * is reacquired before the first object is allocated; objects are then
 * allocated from the extent table in index order, contiguously, and every
 * unit is patched by its kind. Identity comes from the index table: index i
 * is one pointer, however many units name it. */
#define _GNU_SOURCE
#include "view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pass over the extent and object tables. With `patch` it writes every
 * unit of the allocated objects ptrs[1..n]; without, it only checks (verify).
 * Either way every unit is range-checked before it is used. */
static inline __attribute__((always_inline)) mp_img_status
objects_pass(const struct img_view *v, mp_img_word *const *ptrs, const uintptr_t *fvals,
             const unsigned char *blob, mp_img_error *err, const int patch)
{
    const uint64_t n = v->hd.n_objects, nf = v->hd.n_foreign, nb = v->hd.n_bytes;
    const size_t w = v->hd.meta_width;
    const unsigned char *rec = v->objects_at;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = img_rd64(v->extents_at + 8 * i);
        const uint32_t units = IMG_EXTENT_UNITS(e);
        const struct img_vtype *t = &v->types[IMG_EXTENT_TYPE(e)];
        const mp_img_shape *s = &t->shape;
        mp_img_shape custom;
        if (t->shape_class == IMG_SHAPE_CUSTOM) {
            uint64_t described = img_rd64(rec), mask = img_rd64(rec + 8);
            rec += 16;
            custom = (mp_img_shape){false, units, (uint32_t)described, mask};
            mp_img_shape canon = custom;
            if (described > MP_IMG_MASK_UNITS || img_shape_check(&custom, NULL) != MP_IMG_OK ||
                (img_shape_canon(&canon), memcmp(&canon, &custom, sizeof canon) != 0))
                return img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: bad per-object shape",
                                (unsigned long long)i + 1);
            s = &custom;
        }
        mp_img_word *dst = patch ? ptrs[i + 1] : NULL;
        if (patch && w)
            memcpy(dst - 2 - w, rec, 8 * w); /* metadata, imaged as words */
        rec += 8 * w;
        if (t->shape_class == IMG_SHAPE_DYNAMIC && img_rd64(rec) != (uint64_t)units - 1)
            return img_fail(err, MP_IMG_ERR_CORRUPT,
                            "object %llu: slot-0 count %llu contradicts its %u units",
                            (unsigned long long)i + 1, (unsigned long long)img_rd64(rec),
                            (unsigned)units);
        if (s->mask == 0) {
            for (uint32_t u = 0; u < units; u++) {
                uint64_t x = img_rd64(rec + 8 * (size_t)u);
                if (x > n) {
                    bad = x;
                    goto bad_ref;
                }
                if (patch)
                    dst[u] = (mp_img_word)ptrs[x]; /* ptrs[0] is NULL: nil */
            }
            rec += 8 * (size_t)units;
            continue;
        }
        for (uint32_t u = 0; u < units; u++) {
            uint64_t x = img_rd64(rec + 8 * (size_t)u);
            switch (img_kind(s, u)) {
            case MP_IMG_REF:
                if (x > n) {
                    bad = x;
                    goto bad_ref;
                }
                if (patch)
                    dst[u] = (mp_img_word)ptrs[x];
                break;
            case MP_IMG_WORD:
                if (patch)
                    dst[u] = (mp_img_word)x;
                break;
            case MP_IMG_BYTES:
                if (x) {
                    /* The data at x, its length in the word before, and a
                     * NUL right after it, all inside the blob. */
                    if (x < 8 || x % 8 || x > nb)
                        goto bad_bytes;
                    uint64_t len = img_rd64(v->blob_at + x - 8);
                    if (len >= nb - x || v->blob_at[x + len] != 0)
                        goto bad_bytes;
                }
                if (patch)
                    dst[u] = x ? (mp_img_word)(blob + x) : 0;
                break;
            case MP_IMG_FOREIGN:
                if (x > nf)
                    return img_fail(err, MP_IMG_ERR_CORRUPT,
                                    "object %llu unit %u: foreign index %llu out of range",
                                    (unsigned long long)i + 1, (unsigned)u,
                                    (unsigned long long)x);
                if (patch)
                    dst[u] = fvals[x]; /* fvals[0] is 0: nil */
                break;
            }
            continue;
        bad_bytes:
            return img_fail(err, MP_IMG_ERR_CORRUPT,
                            "object %llu unit %u: bytes offset %llu is not a blob entry",
                            (unsigned long long)i + 1, (unsigned)u, (unsigned long long)x);
        }
        rec += 8 * (size_t)units;
        continue;
    bad_ref:
        return img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: reference to object %llu of %llu",
                        (unsigned long long)i + 1, (unsigned long long)bad, (unsigned long long)n);
    }
    return MP_IMG_OK;
}

mp_img_status img_view_check_objects(const struct img_view *v, mp_img_error *err)
{
    return objects_pass(v, NULL, NULL, NULL, err, 0);
}

static mp_img_status patch_objects(const struct img_view *v, mp_img_word *const *ptrs,
                                   const uintptr_t *fvals, const unsigned char *blob,
                                   mp_img_error *err)
{
    return objects_pass(v, ptrs, fvals, blob, err, 1);
}

/* Resolve foreign: every entry reacquired by name, before any object. The
 * `code` entries come last, against the modules loaded by then (including
 * any a dlsym entry just opened), so the result does not depend on the
 * order of the table. */
static mp_img_status resolve_all(mp_img_heap *h, const struct img_view *v, uintptr_t *fvals,
                                 mp_img_error *err)
{
    mp_img_status st = MP_IMG_OK;
    fvals[0] = 0;
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind != IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], NULL, err);
    if (st != MP_IMG_OK || v->n_code == 0)
        return st;
    struct img_modules mods = {0};
    if (img_modules_load(&mods))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory listing modules");
    if (!(h->codes = calloc(v->n_code, sizeof *h->codes))) {
        img_modules_free(&mods);
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory naming code locations");
    }
    for (uint64_t k = 0; k < v->hd.n_foreign && st == MP_IMG_OK; k++)
        if (v->foreign[k].kind == IMG_FOREIGN_CODE)
            st = img_resolve(h, &v->foreign[k], (size_t)k + 1, &fvals[k + 1], &mods, err);
    img_modules_free(&mods);
    return st;
}

/* Allocate: one object per extent, in index order, in one reserved run. */
static mp_img_status allocate_all(mp_img_heap *h, const struct img_view *v, mp_img_word **ptrs,
                                  mp_img_error *err)
{
    if (img_reserve(h, (size_t)v->heap_bytes))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    ptrs[0] = NULL;
    for (uint64_t i = 0; i < v->hd.n_objects; i++) {
        uint64_t e = img_rd64(v->extents_at + 8 * i);
        mp_img_word *obj = img_alloc_raw(h, IMG_EXTENT_TYPE(e), IMG_EXTENT_UNITS(e));
        if (!obj)
            return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory at object %llu",
                            (unsigned long long)i + 1);
        img_hdr(obj)->flags = IMG_EXTENT_FLAGS(e);
        ptrs[i + 1] = obj;
    }
    return MP_IMG_OK;
}

static mp_img_status install_roots(mp_img_heap *h, const struct img_view *v,
                                   mp_img_word *const *ptrs, mp_img_error *err)
{
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        char name[IMG_NAME_MAX + 1];
        memcpy(name, v->roots[r].name, v->roots[r].name_len);
        name[v->roots[r].name_len] = '\0';
        mp_img_status st = mp_img_root_set(h, name, ptrs[v->roots[r].index], err);
        if (st != MP_IMG_OK)
            return st;
    }
    return MP_IMG_OK;
}

static mp_img_status load_view(mp_img_registry *reg, const struct img_view *v,
                               mp_img_heap **out, mp_img_error *err)
{
    mp_img_heap *h = NULL;
    mp_img_status st = mp_img_heap_new(reg, &h, err);
    if (st != MP_IMG_OK)
        return st;
    uintptr_t *fvals = malloc((v->hd.n_foreign + 1) * sizeof *fvals);
    mp_img_word **ptrs = malloc((v->hd.n_objects + 1) * sizeof *ptrs);
    unsigned char *blob = v->hd.n_bytes ? malloc(v->hd.n_bytes) : NULL;
    if (!fvals || !ptrs || (v->hd.n_bytes && !blob)) {
        free(blob);
        st = img_fail(err, MP_IMG_ERR_NOMEM, "out of memory loading %llu objects",
                      (unsigned long long)v->hd.n_objects);
        goto out;
    }
    if (blob) {
        memcpy(blob, v->blob_at, v->hd.n_bytes);
        if (img_heap_own_block(h, blob)) {
            free(blob);
            st = img_fail(err, MP_IMG_ERR_NOMEM, "out of memory loading the byte blob");
            goto out;
        }
    }
    if ((st = resolve_all(h, v, fvals, err)) == MP_IMG_OK &&
        (st = allocate_all(h, v, ptrs, err)) == MP_IMG_OK &&
        (st = patch_objects(v, ptrs, fvals, blob, err)) == MP_IMG_OK)
        st = install_roots(h, v, ptrs, err);
out:
    free(fvals);
    free(ptrs);
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
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || (!data && len))
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "registry and data must be given");
    struct img_view v;
    mp_img_status st = img_view_open(&v, data ? data : "", len, reg, err);
    if (st == MP_IMG_OK)
        st = load_view(reg, &v, out, err);
    img_view_close(&v);
    return st;
}

/* Reads a whole file into a malloc'ed buffer. */
static mp_img_status read_file(const char *path, unsigned char **buf, size_t *len,
                               mp_img_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return img_fail(err, MP_IMG_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = S_ISREG(sb.st_mode) ? errno : EINVAL;
        close(fd);
        return img_fail(err, MP_IMG_ERR_IO, "cannot read '%s': %s", path,
                        e == EINVAL ? "not a regular file" : strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    unsigned char *b = malloc(size ? size : 1);
    if (!b) {
        close(fd);
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory reading '%s'", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, b + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(b);
            close(fd);
            return img_fail(err, MP_IMG_ERR_IO, "reading '%s': %s", path, strerror(e));
        }
        if (n == 0)
            break; /* shrank under us: the view will say what is missing */
        got += (size_t)n;
    }
    close(fd);
    *buf = b;
    *len = got;
    return MP_IMG_OK;
}

mp_img_status mp_img_load(mp_img_registry *reg, const char *path, mp_img_heap **out,
                          mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || !path)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "registry and path must be given");
    unsigned char *buf;
    size_t len;
    mp_img_status st = read_file(path, &buf, &len, err);
    if (st != MP_IMG_OK)
        return st;
    st = mp_img_load_memory(reg, buf, len, out, err);
    free(buf);
    return st;
}

mp_img_status mp_img_verify(const char *path, mp_img_error *err)
{
    if (!path)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "path must be given");
    unsigned char *buf;
    size_t len;
    mp_img_status st = read_file(path, &buf, &len, err);
    if (st != MP_IMG_OK)
        return st;
    struct img_view v;
    st = img_view_open(&v, buf, len, NULL, err);
    if (st == MP_IMG_OK)
        st = img_view_check_objects(&v, err);
    img_view_close(&v);
    free(buf);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
