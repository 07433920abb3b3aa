/* SPDX-License-Identifier: MIT */
/* The object pass's shared state: the per-type plans (plan.c) and the
 * state of one pass over the object region, used by the careful pass
 * (pass.c), the fast fill (fill.c) and the loader that runs them
 * (loader.c). Internal. */
#ifndef MIMPROF_IMAGE_PASS_H
#define MIMPROF_IMAGE_PASS_H

#include "view.h"

#include "checksum.h"

#include <string.h>

/* File bytes hashed ahead of the objects that read them: small enough to
 * stay in the second-level cache while the objects are placed. */
#define WINDOW ((size_t)128 << 10)

/* How the pass treats a type: its sound header word, and its units as a
 * head of up to 32 units of any kind followed by a tail of one kind. */
enum plan_code {
    PLAN_NONE,    /* no shape (or no such type): any instance is corrupt */
    PLAN_FIXED,   /* fixed count (in the header word compared) */
    PLAN_DYNAMIC, /* slot 0 counts the units after it */
    PLAN_CUSTOM,  /* shape from the shape table */
};

/* The fast fill's own cases (fill.c), beside the plan's general ones. */
enum fast_code {
    FAST_GENERAL,    /* head and tail */
    FAST_REF2,       /* fixed: two references */
    FAST_WORD1,      /* fixed: one word */
    FAST_WORD_BYTES, /* fixed: a word, then bytes */
};

struct plan {
    uint64_t hmask, expect; /* a sound header word h has (h & hmask) == expect */
    unsigned fast;
    unsigned code;
    uint32_t head;      /* units before the tail */
    unsigned tail;      /* the kind of every later unit */
    mp_img_shape shape; /* FIXED, DYNAMIC */
    unsigned char kinds[MP_IMG_MASK_UNITS];
};

struct pass {
    const struct img_view *v;
    struct plan *plans; /* tmask + 1 of them: a type index is masked, not compared */
    uint32_t tmask;
    mp_img_word *base;      /* fill: the heap's run (the region's copy) */
    unsigned char *blob;    /* fill: the heap's copy of the byte blob */
    const uintptr_t *fvals; /* fill: foreign values; fvals[0] = 0 */
    uint64_t *starts;       /* one bit per region word: unit 0 of an object */
    uint64_t *targets;      /* one bit per region word a reference names */
    struct img_hash hash;
    int targets_in_heap; /* targets lies in the heap's block (freed with it) */
    size_t hashed;       /* file bytes [IMG_CHECKSUM_FROM, hashed) are hashed */
    int blob_copied;     /* the blob is in the heap already */
};

/* The plans of v's types: tmask + 1 of them (a power of two, so that a
 * type index is masked, not compared); calloc()ed, NULL when out of memory. */
struct plan *img_plans_make(const struct img_view *v, uint32_t *tmask);

/* Hashes the file up to `upto`, copying what lies in the byte blob to the
 * heap's copy of it while it is in the cache. */
static inline void img_pass_hash_to(struct pass *ps, size_t upto)
{
    const struct img_view *v = ps->v;
    size_t blob_at = (size_t)(v->blob_at - v->data);
    while (ps->hashed < upto) {
        size_t n = upto - ps->hashed < WINDOW ? upto - ps->hashed : WINDOW;
        img_hash_update(&ps->hash, v->data + ps->hashed, n);
        if (ps->blob && !ps->blob_copied && ps->hashed + n > blob_at) {
            size_t from = ps->hashed > blob_at ? ps->hashed : blob_at;
            memcpy(ps->blob + (from - blob_at), v->data + from, ps->hashed + n - from);
        }
        ps->hashed += n;
    }
}

/* Starts a pass over v: plans made, the hash begun at IMG_CHECKSUM_FROM,
 * and (with `targets`) target bits allocated. pass_end frees what it made. */
mp_img_status img_pass_begin(struct pass *ps, const struct img_view *v, int targets,
                             mp_img_error *err);
void img_pass_end(struct pass *ps);

/* The careful pass with fill (pass.c): every object checked and written
 * into ps->base, any refusal named; for images with metadata words or
 * per-object shapes, which the fast fill does not take. */
mp_img_status img_pass_fill(struct pass *ps, mp_img_error *err);

/* The fast fill (fill.c): 0 when the region is sound, its checksum
 * included; -1 at the first anomaly, without saying which (the careful
 * pass, img_view_check_objects, says). Images without metadata words or
 * per-object shapes only. */
int img_fast_fill(struct pass *ps);

#endif
