/* SPDX-License-Identifier: MIT */
/* In-memory structures shared by the implementation files. Nothing here is
 * part of the public API. */
#ifndef MP_IMG_INTERNAL_H
#define MP_IMG_INTERNAL_H

#include "format.h"

#include <mimprof/image.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* ---- status.c ---------------------------------------------------- */

/* Records status + a printf-style sentence in err (if non-NULL) and
 * returns status. */
mp_img_status img_fail(mp_img_error *err, mp_img_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records success in err (if non-NULL); returns MP_IMG_OK. */
mp_img_status img_ok(mp_img_error *err);

/* ---- mem.c ---------------------------------------------------------- */

/* Grows *arr (elements of `elem` bytes, capacity *cap) to hold `need`;
 * doubles, so appends are amortised O(1). 0, or -1 with *arr untouched. */
int img_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* A block of `size` bytes, populated up front when large (*mapped says
 * which allocator it came from; pass it back to img_big_free). Not zeroed
 * when it comes from malloc. NULL on ENOMEM. */
void *img_big_alloc(size_t size, int *mapped);
/* img_big_alloc, its pages faulted in as they are first written rather
 * than up front: for a block about to be written once, front to back, each
 * huge page is then zeroed by the kernel just before it is filled, while
 * it is still in the cache. */
void *img_big_alloc_lazy(size_t size, int *mapped);
/* img_big_alloc, zero-filled. */
void *img_big_zalloc(size_t size, int *mapped);
void img_big_free(void *p, size_t size, int mapped);
/* The size a block of `size` bytes really occupies: one bound for huge
 * pages is rounded up to whole 2 MiB pages (a partial last one would fault
 * in 4 KiB at a time), and the slack can be used for free. */
size_t img_big_size(size_t size);

/* A block from img_big_alloc with what it takes to free it. */
struct img_block {
    void *p;
    size_t size;
    int mapped;
};

/* ---- platform.c ---------------------------------------------------- */

/* The release, OS and arch this process writes and accepts, NUL-padded to
 * the header's 16-byte text fields. */
void img_platform(char release[16], char os[16], char arch[16]);

/* ---- shape.c ----------------------------------------------------- */

/* Checks the invariants every shape keeps: described <= 32, no mask bits
 * past described units, unit 0 a word when dynamic. */
mp_img_status img_shape_check(const mp_img_shape *s, mp_img_error *err);
/* Rewrites a valid shape into its one canonical form (the type table and
 * its digest hold canonical shapes only). */
void img_shape_canon(mp_img_shape *s);
/* Field-wise equality (never memcmp: the struct has padding). */
int img_shape_equal(const mp_img_shape *a, const mp_img_shape *b);
/* True when the shape has a unit of `kind` among its first `units` units. */
int img_shape_has_kind(const mp_img_shape *s, size_t units, mp_img_kind kind);

/* ---- type.c ------------------------------------------------------ */

struct mp_img_type {
    char *name;
    size_t name_len;
    uint32_t index;       /* position in the registry = in the type table */
    unsigned shape_class; /* enum img_shape_class */
    mp_img_shape shape;   /* valid for FIXED and DYNAMIC */
    mp_img_type_options opts;
};

struct mp_img_registry {
    mp_img_type **types;
    size_t n_types, cap_types;
    size_t meta_width;
    unsigned refused_foreign; /* MP_IMG_ALLOW_* bits the loader refuses (0: none) */
};

/* Serialises the registry's type table exactly as the writer stores it;
 * returns a malloc'ed buffer (NULL on ENOMEM) and its size. */
unsigned char *img_type_table(const mp_img_registry *reg, size_t *size);

/* ---- heap.c ------------------------------------------------------ */

/* The hidden header: one word, immediately before unit 0. The metadata
 * words (meta width of them) sit immediately before the header. */
struct img_obj {
    uint32_t units; /* allocated unit count */
    uint16_t type;  /* registry index (a registry holds at most 65535 types) */
    uint16_t flags; /* user flags (MP_IMG_USER_FLAGS) | IMG_TRACED */
};
_Static_assert(sizeof(struct img_obj) == 8, "object header is one word");

/* The most units an object may have (its header holds a 32-bit count). */
#define IMG_MAX_UNITS_MEM UINT32_MAX

/* The trace flag: set by a trace, cleared by a chain walk. It is the
 * library's alone, above the user bits, so tracing never disturbs them. */
#define IMG_TRACED 0x8000u
_Static_assert((IMG_TRACED & MP_IMG_USER_FLAGS) == 0, "the trace bit is not a user bit");

static inline struct img_obj *img_hdr(const void *obj) { return (struct img_obj *)obj - 1; }

/* A chunk of the chain: objects back to back in allocation order, each
 * [meta words][header][units]. `starts` has one bit per word of the chunk,
 * set at every object's unit 0: the exact membership test. */
struct img_chunk {
    unsigned char *base;
    size_t cap;  /* bytes */
    size_t used; /* bytes; objects occupy [base, base + used) */
    size_t objects;
    uint64_t *starts;   /* cap / 8 bits */
    size_t size;        /* bytes allocated at base: cap, or more when a load put
                           the byte blob after the objects */
    int mapped;         /* base came from img_big_alloc's mapping */
    int starts_in_base; /* `starts` lies in the block at base (a load's), not malloc'ed */
};

struct img_root {
    char *name;
    void *obj;
};

struct img_code_rec; /* foreign.c */

/* A library a load reacquired symbols from; closed with the heap. */
struct img_handle {
    char *library; /* "" = the main program */
    void *handle;
};

struct mp_img_heap {
    mp_img_registry *reg;
    size_t meta_width;
    /* The chain: chunks in allocation order. */
    struct img_chunk *chunks;
    size_t n_chunks, cap_chunks;
    /* The same chunks sorted by base address, for the membership test. */
    size_t *by_addr;
    size_t last_chunk;      /* membership cache */
    size_t count;           /* objects on the chain */
    struct img_root *roots; /* sorted by name */
    size_t n_roots, cap_roots;
    /* What a load leaves the heap owning. */
    void **blocks; /* byte blobs */
    size_t n_blocks, cap_blocks;
    struct img_handle *handles; /* dlopen handles, by library name */
    size_t n_handles, cap_handles;
    struct img_code_rec *codes; /* named code locations */
    size_t n_codes;
};

/* Bytes one object of `units` units occupies on a heap. */
static inline size_t img_obj_size(size_t meta_width, size_t units)
{
    return (meta_width + 1 + units) * sizeof(mp_img_word);
}
/* Appends a chunk the caller allocated (img_big_alloc, `size` bytes, the
 * first `cap` of them for objects) with its start bits (calloc'ed, cap / 8
 * bits); the heap owns both from then on, even on failure (-1, ENOMEM). */
struct img_chunk *img_heap_add_chunk(mp_img_heap *h, void *base, size_t cap, size_t size,
                                     int mapped, uint64_t *starts);
/* img_alloc_raw when the last chunk is full: adds a chunk. */
void *img_alloc_slow(mp_img_heap *h, uint32_t type, size_t units);

/* Allocates an object without zeroing its units (the loader fills every
 * one, mp_img_alloc zeroes them). NULL with errno ENOMEM. */
static inline void *img_alloc_raw(mp_img_heap *h, uint32_t type, size_t units)
{
    struct img_chunk *c = h->n_chunks ? &h->chunks[h->n_chunks - 1] : NULL;
    size_t size = img_obj_size(h->meta_width, units);
    if (!c || units > IMG_MAX_UNITS_MEM || c->cap - c->used < size)
        return img_alloc_slow(h, type, units);
    mp_img_word *meta = (mp_img_word *)(c->base + c->used);
    struct img_obj *hdr = (struct img_obj *)(meta + h->meta_width);
    void *obj = hdr + 1;
    size_t word = (size_t)((unsigned char *)obj - c->base) / sizeof(mp_img_word);
    /* Invariant: a bit in `starts` is set exactly at each object's unit 0. */
    c->starts[word / 64] |= (uint64_t)1 << (word % 64);
    c->used += size;
    c->objects++;
    h->count++;
    hdr->units = (uint32_t)units;
    hdr->type = (uint16_t)type;
    hdr->flags = 0;
    return obj;
}
/* Takes ownership of a malloc'ed block (freed with the heap). */
int img_heap_own_block(mp_img_heap *h, void *block);
/* The heap's handle on `library` ("" = main program), opened on first use
 * and closed with the heap; NULL with the dlerror() text in `why`. */
void *img_heap_library(mp_img_heap *h, const char *library, const char **why);

/* Where p is: true when p is an object of h (never dereferences p), with
 * its chunk and the word index of its unit 0 in that chunk. */
bool img_heap_locate(const mp_img_heap *h, const void *p, size_t *chunk, size_t *word);

/* Calls fn on every object of the chain, in allocation order. */
void img_chain_walk(const mp_img_heap *h, void (*fn)(void *obj, void *ctx), void *ctx);

/* ---- trace.c ----------------------------------------------------- */

/* A trace is the mark phase; with `emit` it also emits, as it marks, the
 * records the image's region will hold. Breadth first, an object's index
 * is known the moment it is first reached (its shape is decided then), so
 * when object i is processed every one of its units can be resolved:
 * references to indices, words copied, bytes to their blob offsets. Only
 * foreign units wait, as placeholders, to be named after the walk (never
 * during it); the writer then places the records in the region, type by
 * type, and turns indices into region offsets (writer.c). */
struct img_bytes_ref {
    const void *data;
    uint64_t len;
};
struct img_foreign_ref {
    size_t pos; /* word of the records holding the unit */
    const mp_img_type *type;
    uintptr_t value;
    size_t index, unit; /* where, for a refusal */
};
struct img_trace {
    int emit;
    void **order; /* reachable objects; order[i] has index i + 1 */
    size_t n, cap;
    /* The stamps: the index of every object of the heap that was reached,
     * chunk by chunk; the k-th object of chunk c
     * has stamps[first[c] + k], k found from the chunk's start bits and its
     * rank directory (objects before each group of 64 words, at rank +
     * rank_at[c]). Only the trace reads them: every reference is resolved
     * while it is visited. */
    uint32_t *stamps, *rank;
    size_t *first, *rank_at;
    size_t *words; /* per chunk: its used words when the trace began */
    size_t n_chunks;
    struct img_block stamps_block, order_block, units_block, rec_block;
    uint64_t *root_index; /* the index of each root (0 = nil) */
    uint32_t *units;      /* units written for order[i], decided when reached */
    uint64_t region;      /* words of the region, the objects reached so far */
    uint64_t *shapes;     /* (described, mask) per per-object-shape object */
    size_t n_shapes, cap_shapes, shapes_done;
    uint64_t *rec; /* emit: the records, in index order */
    size_t rec_len;
    struct img_bytes_ref *bytes; /* emit: the blob's entries, in order */
    size_t n_bytes, cap_bytes;
    uint64_t blob_size;
    struct img_foreign_ref *frefs; /* emit: foreign units to name */
    size_t n_frefs, cap_frefs;
};

/* Bytes one blob entry takes: length word, data, at least one zero. */
static inline uint64_t img_blob_entry(uint64_t len) { return 8 + img_pad8(len + 1); }

/* Fast kind lookup for hot loops. */
static inline mp_img_kind img_kind(const mp_img_shape *s, size_t unit)
{
    if (s->mask == 0)
        return MP_IMG_REF;
    size_t i = unit < s->described ? unit : s->described - 1;
    return (mp_img_kind)((s->mask >> (2 * i)) & 3u);
}

/* Traces from the roots in name order, breadth first: every reachable
 * object gets IMG_TRACED and a stamp, its index. Refuses references that are
 * not objects of the heap, shapeless types and contradicted shapes. With
 * tr->emit set (by the caller, after zeroing *tr) it also emits the object
 * table. The caller must call img_trace_clear() whatever the result. */
mp_img_status img_trace_run(mp_img_heap *h, struct img_trace *tr, mp_img_error *err);
/* Clears IMG_TRACED by a chain walk and frees the trace. */
void img_trace_clear(mp_img_heap *h, struct img_trace *tr);

/* ---- foreign.c / modules.c ---------------------------------------- */

/* A named foreign value, as the writer names it and the loader reads it. */
struct img_foreign {
    unsigned kind;          /* enum img_foreign_kind */
    const unsigned char *a; /* DLSYM library / CODE build-id / EXT name */
    size_t a_len;
    const unsigned char *b; /* DLSYM symbol / CODE path */
    size_t b_len;
    uint64_t n; /* FD role / CODE offset / EXT type index */
};

/* A named code location owned by a heap: what an unresolved `code` unit
 * points at. */
struct img_code_rec {
    uint64_t magic;
    unsigned char *build_id;
    size_t build_id_len;
    char *path;
    uintptr_t offset;
};

/* The snapshot behind mp_img_modules (modules.c). Internal users hold
 * one by value: img_modules_load fills it, img_modules_free empties it. */
struct mp_img_modules {
    mp_img_module *m;
    size_t n;
    mp_img_segment *segs; /* every module's segments, m[i].segs points in */
};
int img_modules_load(struct mp_img_modules *mods);
void img_modules_free(struct mp_img_modules *mods);

/* Writer side: names `value` per the type's policy into *out (its strings
 * live until the namer is freed). Returns MP_IMG_OK (kind NIL for a value
 * written as nil), MP_IMG_E_UNNAMEABLE with `why` set to the reason
 * clause, or MP_IMG_E_NOMEM. */
struct img_namer;
struct img_namer *img_namer_new(const mp_img_heap *heap);
void img_namer_free(struct img_namer *nm);
mp_img_status img_name_value(struct img_namer *nm, const mp_img_type *type, uintptr_t value,
                             struct img_foreign *out, const char **why);

/* Loader side: reacquires foreign entry `index` (1-based) for heap h. An
 * unresolved `code` entry becomes h->codes[h->n_codes++], whose capacity the
 * caller reserved. */
mp_img_status img_resolve(mp_img_heap *h, const struct img_foreign *f, size_t index,
                          uintptr_t *value, const struct mp_img_modules *mods, mp_img_error *err);

#endif /* MP_IMG_INTERNAL_H */
