/* SPDX-License-Identifier: MIT */
/* The writer: a mark phase that emits.
 *
 *   1. trace - stamp an index on every object reachable from the roots and
 *              emit its record, every unit resolved by its kind (trace.c);
 *              refuses what it cannot place.
 *   2. name  - name the foreign values, over the foreign table alone, never
 *              during the walk, and fill in their placeholders; refuses what
 *              the vocabulary cannot name.
 *   3. place  - lay the records out as the object region: type by type, each
 *              type's objects in index order (so that a loader meets long
 *              runs of one type); the write streams them in that order,
 *              references turned into word offsets, consecutive objects
 *              with one header word of a fixed-shape type as a run (one
 *              header word and a count for all of them).
 *   4. write - one pass of write(2) calls to a temporary (the header and
 *              tables carry their own head checksum), the checksum,
 *              fdatasync, clear the incomplete marker last, rename.
 *
 * Every refusal happens before step 3 creates a file. The trace flag is
 * taken back by a chain walk whatever happens. */
#define _GNU_SOURCE
#include "format.h"
#include "internal.h"
#include "map.h"
#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__APPLE__) /* macOS declares no fdatasync(2); fsync(2) flushes the data too */
#define fdatasync(fd) fsync(fd)
#endif

/* One distinct foreign value (per naming class), in first-occurrence order. */
struct value_ent {
    uintptr_t value;
    const mp_img_type *type;
    size_t obj, unit; /* its first occurrence, for the refusal */
    uint64_t index;   /* foreign table index once named (0 = nil) */
};

struct plan {
    size_t meta_width;
    unsigned char *types;
    size_t types_size;
    /* foreign values and the foreign table */
    struct img_map values; /* (value, class) -> position in vals */
    struct value_ent *vals;
    size_t n_vals, cap_vals;
    unsigned char *ftab;
    size_t ftab_size, ftab_cap;
    uint64_t *entry_off; /* offset of entry k (0-based) in ftab */
    size_t n_foreign, cap_entries;
    struct img_map names; /* (hash, length) of an entry -> its index */
    uint64_t roots_size;
};

/* The key that makes two foreign values "the same" before naming. */
static uint64_t value_class(const mp_img_type *t)
{
    return t->opts.foreign == MP_IMG_FOREIGN_CALLBACKS ? 16 + (uint64_t)t->index
                                                       : (uint64_t)t->opts.foreign;
}

static void plan_free(struct plan *p)
{
    free(p->types);
    img_map_free(&p->values);
    img_map_free(&p->names);
    free(p->vals);
    free(p->ftab);
    free(p->entry_off);
}

static int ftab_put(struct plan *p, const void *data, size_t len)
{
    if (img_grow((void **)&p->ftab, &p->ftab_cap, p->ftab_size + img_pad8(len), 1))
        return -1;
    memcpy(p->ftab + p->ftab_size, data, len);
    memset(p->ftab + p->ftab_size + len, 0, img_pad8(len) - len);
    p->ftab_size += img_pad8(len);
    return 0;
}

static int ftab_word(struct plan *p, uint64_t w) { return ftab_put(p, &w, 8); }

static int ftab_str(struct plan *p, const unsigned char *s, size_t len)
{
    return ftab_word(p, len) || ftab_put(p, s, len);
}

/* Appends a named entry to the foreign table, or finds the identical entry
 * already there: one name, one index, so identity survives the load. */
static int add_entry(struct plan *p, const struct img_foreign *f, uint64_t *index)
{
    size_t start = p->ftab_size;
    int bad = ftab_word(p, f->kind);
    switch (f->kind) {
    case IMG_FOREIGN_DLSYM:
        bad = bad || ftab_str(p, f->a, f->a_len) || ftab_str(p, f->b, f->b_len);
        break;
    case IMG_FOREIGN_FD:
        bad = bad || ftab_word(p, f->n);
        break;
    case IMG_FOREIGN_CODE:
        bad =
            bad || ftab_str(p, f->a, f->a_len) || ftab_str(p, f->b, f->b_len) || ftab_word(p, f->n);
        break;
    default: /* IMG_FOREIGN_EXT */
        bad = bad || ftab_word(p, f->n) || ftab_str(p, f->a, f->a_len);
        break;
    }
    if (bad)
        return -1;
    size_t len = p->ftab_size - start;
    int inserted;
    uint64_t *slot =
        img_map_put(&p->names, img_hash(p->ftab + start, len), len, p->n_foreign + 1, &inserted);
    if (!slot)
        return -1;
    if (!inserted) {
        size_t k = (size_t)*slot - 1;
        size_t klen = (k + 1 < p->n_foreign ? p->entry_off[k + 1] : start) - p->entry_off[k];
        if (klen == len && memcmp(p->ftab + p->entry_off[k], p->ftab + start, len) == 0) {
            p->ftab_size = start; /* drop the duplicate */
            *index = *slot;
            return 0;
        }
        /* A hash collision between different names: keep both entries. */
    }
    if (img_grow((void **)&p->entry_off, &p->cap_entries, p->n_foreign + 1, sizeof *p->entry_off))
        return -1;
    p->entry_off[p->n_foreign++] = start;
    *index = p->n_foreign;
    return 0;
}

/* Collects the distinct foreign values of the walk, in first-occurrence
 * order (the frefs are in object and unit order). */
static mp_img_status collect_values(struct plan *p, const struct img_trace *tr, mp_img_error *err)
{
    for (size_t i = 0; i < tr->n_frefs; i++) {
        const struct img_foreign_ref *f = &tr->frefs[i];
        int inserted;
        uint64_t *slot =
            img_map_put(&p->values, f->value, value_class(f->type), p->n_vals, &inserted);
        if (!slot ||
            (inserted && img_grow((void **)&p->vals, &p->cap_vals, p->n_vals + 1, sizeof *p->vals)))
            return img_fail(err, MP_IMG_E_NOMEM, "out of memory at object %zu", f->index);
        if (inserted)
            p->vals[p->n_vals++] = (struct value_ent){f->value, f->type, f->index, f->unit, 0};
    }
    return MP_IMG_OK;
}

/* Step 2: name every distinct foreign value, then fill in every unit. */
static mp_img_status name_all(const mp_img_heap *h, struct plan *p, struct img_trace *tr,
                              mp_img_error *err)
{
    mp_img_status st = collect_values(p, tr, err);
    if (st != MP_IMG_OK)
        return st;
    struct img_namer *nm = img_namer_new(h);
    if (!nm)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory naming foreign values");
    for (size_t i = 0; i < p->n_vals && st == MP_IMG_OK; i++) {
        struct value_ent *v = &p->vals[i];
        struct img_foreign f;
        const char *why = "";
        st = img_name_value(nm, v->type, v->value, &f, &why);
        if (st == MP_IMG_E_UNNAMEABLE)
            st = img_fail(err, st,
                          "object %zu (type '%s') unit %zu: foreign value 0x%lx cannot be "
                          "named: %s",
                          v->obj, v->type->name, v->unit, (unsigned long)v->value, why);
        else if (st != MP_IMG_OK)
            st = img_fail(err, st, "out of memory naming foreign values");
        else if (f.kind == IMG_FOREIGN_NIL)
            v->index = 0;
        else if (f.a_len > IMG_STR_MAX || f.b_len > IMG_STR_MAX)
            st = img_fail(err, MP_IMG_E_LIMIT,
                          "object %zu (type '%s') unit %zu: the name of foreign value 0x%lx is "
                          "longer than 1 MiB",
                          v->obj, v->type->name, v->unit, (unsigned long)v->value);
        else if (add_entry(p, &f, &v->index))
            st = img_fail(err, MP_IMG_E_NOMEM, "out of memory naming foreign values");
    }
    img_namer_free(nm);
    for (size_t i = 0; i < tr->n_frefs && st == MP_IMG_OK; i++) {
        const struct img_foreign_ref *f = &tr->frefs[i];
        const uint64_t *slot = img_map_get(&p->values, f->value, value_class(f->type));
        tr->rec[f->pos] = p->vals[*slot].index;
    }
    return st;
}

/* ---- step 3 --------------------------------------------------------- */

/* The object region's layout: where each record goes, and in which order
 * the records are written out (the region itself is never built in
 * memory: put_region streams it from the records). */
struct layout {
    uint32_t *off;     /* off[x]: word offset of index x's unit 0; off[0] = 0 */
    uint32_t *pos;     /* pos[i]: word of the records where index i + 1 starts */
    uint32_t *by_type; /* indices - 1, in region order */
    uint64_t *shapes;  /* (described, mask) per per-object-shape object */
    struct img_block off_block, pos_block, by_type_block;
    uint64_t file_words; /* of the region as written (runs take fewer) */
};

static void big_release(struct img_block *b)
{
    if (b->p)
        img_big_free(b->p, b->size, b->mapped);
}

static void layout_free(struct layout *L)
{
    big_release(&L->off_block);
    big_release(&L->pos_block);
    big_release(&L->by_type_block);
    free(L->shapes);
}

static void *block(struct img_block *b, size_t size)
{
    b->size = size ? size : 1;
    b->p = img_big_alloc(b->size, &b->mapped);
    return b->p;
}

/* The type of the record whose header word is at hw (the records are read
 * in order; the objects themselves are scattered over the heap). */
static inline uint16_t rec_type(const uint64_t *hw)
{
    struct img_obj o;
    memcpy(&o, hw, sizeof o);
    return o.type;
}

/* How many objects, from region position k on, one run holds: consecutive
 * objects of one fixed-shape type of at least one unit with one header
 * word (metadata width 0 only); 1 when the object at k starts no run. (At
 * least one unit: so the region never takes more than twice its file
 * words in memory, and the loader can bound the allocation by the file.) */
static size_t run_at(const mp_img_heap *h, const struct img_trace *tr, const struct layout *L,
                     size_t k)
{
    const uint64_t hw = tr->rec[L->pos[L->by_type[k]] + h->meta_width];
    const mp_img_type *t = h->reg->types[rec_type(&hw)];
    if (h->meta_width || t->shape_class != IMG_SHAPE_FIXED || t->shape.count == 0)
        return 1;
    size_t n = 1;
    while (k + n < tr->n && tr->rec[L->pos[L->by_type[k + n]]] == hw)
        n++;
    return n;
}

static mp_img_status place(const mp_img_heap *h, const struct img_trace *tr, struct layout *L,
                           mp_img_error *err)
{
    const size_t nt = h->reg->n_types, w = h->meta_width, n = tr->n;
    uint64_t *cur = calloc(nt + 1, sizeof *cur), *scur = calloc(nt + 1, sizeof *scur);
    size_t *ncur = calloc(nt + 1, sizeof *ncur);
    L->off = block(&L->off_block, (n + 1) * sizeof *L->off);
    L->pos = block(&L->pos_block, (n + 1) * sizeof *L->pos);
    L->by_type = block(&L->by_type_block, (n + 1) * sizeof *L->by_type);
    L->shapes = malloc(tr->n_shapes ? tr->n_shapes * 16 : 1);
    if (!cur || !scur || !ncur || !L->off || !L->pos || !L->by_type || !L->shapes) {
        free(cur);
        free(scur);
        free(ncur);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory placing %zu objects", n);
    }
    /* Each type's words, objects and shapes, then where each type begins.
     * The trace kept the records under 2^32 words. */
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t t = rec_type(tr->rec + at + w);
        cur[t + 1] += w + 1 + tr->units[i];
        ncur[t + 1]++;
        scur[t + 1] += h->reg->types[t]->shape_class == IMG_SHAPE_CUSTOM;
        L->pos[i] = (uint32_t)at;
        at += w + 1 + tr->units[i];
    }
    for (size_t t = 0; t < nt; t++) {
        cur[t + 1] += cur[t];
        ncur[t + 1] += ncur[t];
        scur[t + 1] += scur[t];
    }
    L->off[0] = 0;
    size_t custom = 0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t t = rec_type(tr->rec + L->pos[i] + w);
        L->off[i + 1] = (uint32_t)(cur[t] + w + 1);
        cur[t] += w + 1 + tr->units[i];
        L->by_type[ncur[t]++] = (uint32_t)i;
        if (h->reg->types[t]->shape_class == IMG_SHAPE_CUSTOM) {
            memcpy(L->shapes + 2 * scur[t]++, tr->shapes + 2 * custom, 16);
            custom++;
        }
    }
    free(cur);
    free(scur);
    free(ncur);
    /* A run of r objects stores r - 2 header words fewer; a packed one
     * (all references) half its units, rounded up to a word. */
    L->file_words = tr->rec_len;
    for (size_t k = 0; k < n;) {
        size_t r = run_at(h, tr, L, k);
        if (r >= 2) {
            const mp_img_type *t = h->reg->types[rec_type(tr->rec + L->pos[L->by_type[k]])];
            L->file_words -= r - 2;
            if (t->shape.mask == 0)
                L->file_words -= r * t->shape.count - (r * t->shape.count + 1) / 2;
        }
        k += r;
    }
    return MP_IMG_OK;
}

/* The region, record by record in region order, references turned into
 * word offsets. */
static void put_region(struct img_sink *sk, const mp_img_heap *h, const struct img_trace *tr,
                       const struct layout *L)
{
    const size_t w = h->meta_width;
    /* Per-object shapes in index order, for the kinds of their units. */
    size_t *shape_at = NULL;
    if (tr->n_shapes) {
        shape_at = malloc(tr->n * sizeof *shape_at);
        if (!shape_at) {
            sk->error = ENOMEM;
            return;
        }
        for (size_t i = 0, k = 0; i < tr->n; i++)
            if (h->reg->types[rec_type(tr->rec + L->pos[i] + w)]->shape_class == IMG_SHAPE_CUSTOM)
                shape_at[i] = k++;
    }
    for (size_t k = 0; k < tr->n;) {
        const size_t run = run_at(h, tr, L, k);
        if (run >= 2) { /* header word with the run mark, the count */
            struct img_obj o;
            memcpy(&o, tr->rec + L->pos[L->by_type[k]], sizeof o);
            o.flags |= IMG_RUN;
            img_sink_put(sk, &o, sizeof o);
            img_sink_word(sk, run);
            if (h->reg->types[o.type]->shape.mask == 0) {
                /* Packed: every unit a reference, 32 bits each (the region
                 * is under 2^32 words), padded to a word. */
                uint64_t n32 = 0;
                for (size_t j = 0; j < run; j++, k++) {
                    const size_t i = L->by_type[k];
                    const uint64_t *rec = tr->rec + L->pos[i] + 1;
                    for (uint32_t u = 0; u < tr->units[i]; u++, n32++) {
                        uint32_t x = rec[u] ? L->off[rec[u]] : 0;
                        img_sink_put(sk, &x, 4);
                    }
                }
                if (n32 % 2)
                    img_sink_zeros(sk, 4);
                continue;
            }
        }
        for (size_t j = 0; j < run; j++, k++) {
            const size_t i = L->by_type[k];
            const uint64_t *rec = tr->rec + L->pos[i];
            const mp_img_type *t = h->reg->types[rec_type(rec + w)];
            const uint32_t units = tr->units[i];
            if (run < 2)
                img_sink_put(sk, rec, (w + 1) * 8); /* metadata, header word */
            rec += w + 1;
            mp_img_shape s = t->shape;
            if (t->shape_class == IMG_SHAPE_CUSTOM)
                s = (mp_img_shape){false, units, (uint32_t)tr->shapes[2 * shape_at[i]],
                                   tr->shapes[2 * shape_at[i] + 1]};
            if (s.mask == 0) {
                for (uint32_t u = 0; u < units; u++)
                    img_sink_word(sk, rec[u] ? L->off[rec[u]] : 0);
            } else {
                for (uint32_t u = 0; u < units; u++)
                    img_sink_word(sk, img_kind(&s, u) == MP_IMG_REF && rec[u] ? L->off[rec[u]]
                                                                              : rec[u]);
            }
        }
    }
    free(shape_at);
}

/* ---- step 4 --------------------------------------------------------- */

static void put_str(unsigned char **at, const char *s)
{
    uint64_t len = strlen(s);
    memcpy(*at, &len, 8);
    memcpy(*at + 8, s, len);
    memset(*at + 8 + len, 0, img_pad8(len) - len);
    *at += 8 + img_pad8(len);
}

/* The header and the three small tables, in one buffer, with the head
 * checksum filled in (the checksum comes at the end of the write). */
static unsigned char *put_head(const mp_img_heap *h, const struct img_trace *tr,
                               const struct plan *p, const struct layout *L, size_t *size)
{
    *size = sizeof(struct img_header) + p->types_size + p->ftab_size + p->roots_size;
    unsigned char *buf = malloc(*size);
    if (!buf)
        return NULL;
    struct img_header hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, IMG_MAGIC, IMG_MAGIC_LEN);
    hd.version = IMG_VERSION;
    hd.header_size = sizeof hd;
    hd.incomplete = IMG_INCOMPLETE; /* cleared last */
    hd.checksum = 0;                /* patched once everything after it is written */
    hd.byte_order = IMG_BYTE_ORDER;
    hd.word_size = sizeof(mp_img_word);
    hd.meta_width = (uint32_t)p->meta_width;
    img_platform(hd.release, hd.os, hd.arch);
    hd.type_digest = img_hash(p->types, p->types_size);
    hd.n_types = h->reg->n_types;
    hd.n_foreign = p->n_foreign;
    hd.n_roots = h->n_roots;
    hd.n_objects = tr->n;
    hd.n_bytes = tr->blob_size;
    hd.types_size = p->types_size;
    hd.foreign_size = p->ftab_size;
    hd.roots_size = p->roots_size;
    hd.objects_size = L->file_words * 8;
    hd.region_words = tr->rec_len;
    hd.shapes_size = tr->n_shapes * 16;
    unsigned char *at = buf + sizeof hd;
    memcpy(at, p->types, p->types_size);
    at += p->types_size;
    if (p->ftab_size)
        memcpy(at, p->ftab, p->ftab_size);
    at += p->ftab_size;
    for (size_t r = 0; r < h->n_roots; r++) {
        uint64_t x = L->off[tr->root_index[r]]; /* off[0] = 0: a nil root */
        memcpy(at, &x, 8);
        at += 8;
        put_str(&at, h->roots[r].name);
    }
    memcpy(buf, &hd, sizeof hd);
    hd.head_checksum = img_hash(buf + IMG_HEAD_FROM, *size - IMG_HEAD_FROM);
    memcpy(buf, &hd, sizeof hd);
    return buf;
}

static void put_blob(struct img_sink *sk, const struct img_trace *tr)
{
    for (size_t i = 0; i < tr->n_bytes; i++) {
        uint64_t len = tr->bytes[i].len;
        img_sink_word(sk, len);
        img_sink_put(sk, tr->bytes[i].data, (size_t)len);
        img_sink_zeros(sk, (size_t)(img_pad8(len + 1) - len));
    }
}

/* Streams the whole image into fd; returns 0 or an errno. */
static int put_image(int fd, const mp_img_heap *h, const struct img_trace *tr, const struct plan *p,
                     const struct layout *L)
{
    size_t head_size;
    unsigned char *head = put_head(h, tr, p, L, &head_size);
    struct img_sink sk;
    if (!head || img_sink_open(&sk, fd, IMG_CHECKSUM_FROM)) {
        free(head);
        return ENOMEM;
    }
    img_sink_put(&sk, head, head_size);
    free(head);
    put_region(&sk, h, tr, L);
    img_sink_put(&sk, L->shapes, tr->n_shapes * 16);
    put_blob(&sk, tr);
    int e = img_sink_flush(&sk);
    uint64_t sum = img_hash_final(&sk.hash);
    img_sink_close(&sk);
    if (e)
        return e;
    if ((e = img_pwrite_all(fd, &sum, 8, offsetof(struct img_header, checksum))))
        return e;
    /* fdatasync: the data and the size, without the timestamps. */
    if (fdatasync(fd))
        return errno;
    /* Last: the marker, once everything it vouches for is on disk. */
    uint64_t done = 0;
    if ((e = img_pwrite_all(fd, &done, 8, offsetof(struct img_header, incomplete))))
        return e;
    if (fdatasync(fd))
        return errno;
    return 0;
}

/* Makes the rename durable; a failure here leaves a complete file. */
static void sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

static mp_img_status emit(const mp_img_heap *h, const struct img_trace *tr, const struct plan *p,
                          const struct layout *L, const char *path, mp_img_error *err)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 8);
    if (!tmp)
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory writing '%s'", path);
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".XXXXXX", 8);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return img_fail(err, MP_IMG_E_IO, "cannot create a temporary next to '%s': %s", path,
                        strerror(e));
    }
    int e = fchmod(fd, 0644) ? errno : 0;
    if (!e)
        e = put_image(fd, h, tr, p, L);
    if (close(fd) && !e)
        e = errno;
    if (!e && rename(tmp, path))
        e = errno;
    if (e) {
        unlink(tmp);
        free(tmp);
        return img_fail(err, MP_IMG_E_IO, "writing '%s': %s", path, strerror(e));
    }
    free(tmp);
    sync_dir(path);
    return MP_IMG_OK;
}

mp_img_status mp_img_write(mp_img_heap *h, const char *path, mp_img_error *err)
{
    if (!h || !path || !*path)
        return img_fail(err, MP_IMG_E_ARGUMENT, "heap and path must be given");
    struct plan p;
    memset(&p, 0, sizeof p);
    p.meta_width = h->meta_width;
    struct img_trace tr;
    memset(&tr, 0, sizeof tr);
    tr.emit = 1;
    mp_img_status st = img_trace_run(h, &tr, err);
    if (st == MP_IMG_OK) {
        p.types = img_type_table(h->reg, &p.types_size);
        if (!p.types)
            st = img_fail(err, MP_IMG_E_NOMEM, "out of memory writing the type table");
    }
    if (st == MP_IMG_OK)
        st = name_all(h, &p, &tr, err);
    struct layout L;
    memset(&L, 0, sizeof L);
    if (st == MP_IMG_OK)
        st = place(h, &tr, &L, err);
    if (st == MP_IMG_OK) {
        for (size_t r = 0; r < h->n_roots; r++)
            p.roots_size += 16 + img_pad8(strlen(h->roots[r].name));
        st = emit(h, &tr, &p, &L, path, err);
    }
    layout_free(&L);
    img_trace_clear(h, &tr);
    plan_free(&p);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
