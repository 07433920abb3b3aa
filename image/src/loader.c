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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where the objects go: one run in one chunk, object i (1-based) at word
 * off[i] of the run; computed from the extents before any object memory is
 * written, so that the fill below touches the run once, in order. */
struct img_run {
    struct img_chunk *chunk;
    mp_img_word *base; /* first word of the run */
    size_t base_word;  /* its word index in the chunk, for the start bits */
    uint32_t *off;     /* n + 1 entries; off[0] = 0, masked by REF() */
    size_t off_size;
    int off_mapped;
};

/* The pass over the extent and object tables. With `fill` it writes every
 * object of the run (metadata, header, units); without, it only checks
 * (verify). Either way every unit is range-checked before it is used. */
static inline __attribute__((always_inline)) mp_img_status
objects_pass(const struct img_view *v, const struct img_run *run, const uintptr_t *fvals,
             const unsigned char *blob, mp_img_error *err, const int fill)
{
    const uint64_t n = v->hd.n_objects, nf = v->hd.n_foreign, nb = v->hd.n_bytes;
    const size_t w = v->hd.meta_width;
    const unsigned char *rec = v->objects_at;
    mp_img_word *const base = fill ? run->base : NULL;
    const uint32_t *const off = fill ? run->off : NULL;
    /* Locals, so that stores through dst (words) need not reload them. */
    uint64_t *const starts = fill ? run->chunk->starts : NULL;
    const size_t base_word = fill ? run->base_word : 0;
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
                (img_shape_canon(&canon), !img_shape_equal(&canon, &custom)))
                return img_fail(err, MP_IMG_ERR_CORRUPT, "object %llu: bad per-object shape",
                                (unsigned long long)i + 1);
            s = &custom;
        }
        mp_img_word *dst = NULL;
        if (fill) {
            dst = base + off[i + 1];
            if (w)
                memcpy(dst - 1 - w, rec, 8 * w); /* metadata, imaged as words */
            struct img_obj *hdr = img_hdr(dst);
            hdr->units = units;
            hdr->type = (uint16_t)IMG_EXTENT_TYPE(e);
            hdr->flags = (uint16_t)IMG_EXTENT_FLAGS(e);
            /* Invariant kept: the start bit of every object's unit 0. */
            size_t word = base_word + off[i + 1];
            starts[word / 64] |= (uint64_t)1 << (word % 64);
        }
        rec += 8 * w;
        if (t->shape_class == IMG_SHAPE_DYNAMIC && img_rd64(rec) != (uint64_t)units - 1)
            return img_fail(
                err, MP_IMG_ERR_CORRUPT, "object %llu: slot-0 count %llu contradicts its %u units",
                (unsigned long long)i + 1, (unsigned long long)img_rd64(rec), (unsigned)units);
/* Object x (checked <= n) as a pointer; index 0 is nil. */
#define REF(x) ((mp_img_word)(base + off[x]) & ((mp_img_word)0 - (mp_img_word)((x) != 0)))
        if (s->mask == 0) {
            for (uint32_t u = 0; u < units; u++) {
                uint64_t x = img_rd64(rec + 8 * (size_t)u);
                if (x > n) {
                    bad = x;
                    goto bad_ref;
                }
                if (fill)
                    dst[u] = REF(x);
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
                if (fill)
                    dst[u] = REF(x);
                break;
            case MP_IMG_WORD:
                if (fill)
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
                if (fill)
                    dst[u] = x ? (mp_img_word)(blob + x) : 0;
                break;
            case MP_IMG_FOREIGN:
                if (x > nf)
                    return img_fail(err, MP_IMG_ERR_CORRUPT,
                                    "object %llu unit %u: foreign index %llu out of range",
                                    (unsigned long long)i + 1, (unsigned)u, (unsigned long long)x);
                if (fill)
                    dst[u] = fvals[x]; /* fvals[0] is 0: nil */
                break;
            }
            continue;
        bad_bytes:
            return img_fail(err, MP_IMG_ERR_CORRUPT,
                            "object %llu unit %u: bytes offset %llu is not a blob entry",
                            (unsigned long long)i + 1, (unsigned)u, (unsigned long long)x);
        }
#undef REF
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

/* Allocate and patch: every object of the run written in index order. */
static mp_img_status fill_objects(mp_img_heap *h, const struct img_view *v,
                                  const struct img_run *run, const uintptr_t *fvals,
                                  const unsigned char *blob, mp_img_error *err)
{
    if (!run->chunk)
        return MP_IMG_OK;
    mp_img_status st = objects_pass(v, run, fvals, blob, err, 1);
    if (st != MP_IMG_OK)
        return st; /* the chunk's `used` never covered the run: nothing to undo */
    run->chunk->used += (size_t)v->heap_bytes;
    run->chunk->objects += (size_t)v->hd.n_objects;
    h->count += (size_t)v->hd.n_objects;
    return MP_IMG_OK;
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

/* Every object's place in the run, from the extent table alone (checking
 * it on the way): the last verification, before anything is resolved. */
static mp_img_status place_objects(struct img_view *v, struct img_run *run, mp_img_error *err)
{
    uint64_t n = v->hd.n_objects;
    run->off_size = (size_t)(n + 1) * sizeof *run->off;
    run->off = img_big_alloc(run->off_size, &run->off_mapped);
    if (!run->off)
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)n);
    run->off[0] = 0; /* index 0 is nil; REF() masks it */
    return img_view_check_extents(v, run->off, err);
}

/* Allocate: one run of heap memory for every object. */
static mp_img_status reserve_run(mp_img_heap *h, const struct img_view *v, struct img_run *run,
                                 mp_img_error *err)
{
    if (v->hd.n_objects == 0)
        return MP_IMG_OK; /* no run: roots are all nil */
    if (img_reserve(h, (size_t)v->heap_bytes))
        return img_fail(err, MP_IMG_ERR_NOMEM, "out of memory for %llu objects",
                        (unsigned long long)v->hd.n_objects);
    run->chunk = &h->chunks[h->n_chunks - 1];
    run->base = (mp_img_word *)(run->chunk->base + run->chunk->used);
    run->base_word = run->chunk->used / sizeof(mp_img_word);
    return MP_IMG_OK;
}

static mp_img_status install_roots(mp_img_heap *h, const struct img_view *v,
                                   const struct img_run *run, mp_img_error *err)
{
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        char name[IMG_NAME_MAX + 1];
        memcpy(name, v->roots[r].name, v->roots[r].name_len);
        name[v->roots[r].name_len] = '\0';
        uint64_t x = v->roots[r].index;
        mp_img_status st = mp_img_root_set(h, name, x ? run->base + run->off[x] : NULL, err);
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
    uintptr_t *fvals = malloc((v->hd.n_foreign + 1) * sizeof *fvals);
    struct img_run run = {0};
    unsigned char *blob = v->hd.n_bytes ? malloc(v->hd.n_bytes) : NULL;
    if (!fvals || (v->hd.n_bytes && !blob)) {
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
    if ((st = place_objects(v, &run, err)) == MP_IMG_OK &&
        (st = resolve_all(h, v, fvals, err)) == MP_IMG_OK &&
        (st = reserve_run(h, v, &run, err)) == MP_IMG_OK &&
        (st = fill_objects(h, v, &run, fvals, blob, err)) == MP_IMG_OK)
        st = install_roots(h, v, &run, err);
out:
    free(fvals);
    if (run.off)
        img_big_free(run.off, run.off_size, run.off_mapped);
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

/* An image file in memory: mapped read-only (MAP_POPULATE: no copy and one
 * batch of faults), or read into a buffer when it cannot be mapped. A file
 * truncated by another process while mapped raises SIGBUS, as any mapped
 * file does; mp_img_write() replaces images by rename, never in place. */
struct img_file {
    const unsigned char *data;
    size_t len;
    void *map;
    unsigned char *buf;
};

static void file_close(struct img_file *f)
{
    if (f->map)
        munmap(f->map, f->len);
    free(f->buf);
}

static mp_img_status file_open(const char *path, struct img_file *f, mp_img_error *err)
{
    memset(f, 0, sizeof *f);
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
    if (size > 0) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            f->map = m;
            f->data = m;
            f->len = size;
            return MP_IMG_OK;
        }
    }
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
    f->buf = b;
    f->data = b;
    f->len = got;
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
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    st = mp_img_load_memory(reg, f.data, f.len, out, err);
    file_close(&f);
    return st;
}

mp_img_status mp_img_verify(const char *path, mp_img_error *err)
{
    if (!path)
        return img_fail(err, MP_IMG_ERR_ARGUMENT, "path must be given");
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    struct img_view v;
    st = img_view_open(&v, f.data, f.len, NULL, err);
    if (st == MP_IMG_OK)
        st = img_view_check_extents(&v, NULL, err);
    if (st == MP_IMG_OK)
        st = img_view_check_objects(&v, err);
    img_view_close(&v);
    file_close(&f);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
