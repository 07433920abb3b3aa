/* SPDX-License-Identifier: MIT */
/* Pruning a report's stacks at the drop pattern (drop.h), as pprof's
 * Profile.Prune does with a profile's drop_frames, so that `go tool
 * pprof`, which prunes again on reading, finds nothing more to drop:
 *
 *  - a location's frames (innermost first) are scanned from the outermost
 *    for the first that matches; when it is the outermost written frame
 *    the location matches whole, else its frames inside the match are
 *    left out of the location (in every stack, as pprof does);
 *  - each stack is scanned from the root; locations before the first one
 *    that does not match are never dropped (a stack of allocator frames
 *    stays whole); at the first matching location after it the stack is
 *    cut: that location and its callees go when it matches whole, only
 *    its callees otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "drop.h"
#include "symbols.h"

size_t mp_prune_cut(size_t n, mp_prune_match (*match)(void *ctx, size_t j), void *ctx)
{
    bool user = false;
    for (size_t j = n; j-- > 0;) {
        mp_prune_match m = match(ctx, j);
        if (m == MP_PRUNE_NONE) {
            user = true;
            continue;
        }
        if (user)
            return m == MP_PRUNE_WHOLE ? j + 1 : j;
    }
    return 0;
}

/* Index of the outermost matching frame of `pi`; -1 none. *whole: no
 * frame written after it (the whole location goes). */
static int outermost_match(mp_drop *d, const mp_pcinfo *pi, bool *whole)
{
    *whole = true;
    for (size_t k = pi->nframes; k-- > 0;) {
        const mp_frame *f = &pi->frames[k];
        if (f->func != NULL && mp_drop_matches(d, f->func))
            return (int)k;
        if (f->func != NULL || f->file != NULL) /* encode.c writes a Line for it */
            *whole = false;
    }
    return -1;
}

typedef struct {
    const uint32_t *stk;
    const mp_prune_match *m;
} stack_view;

static mp_prune_match match_at(void *ctx, size_t j)
{
    const stack_view *v = ctx;
    return v->m[v->stk[j]];
}

bool mp_report_prune(mp_report_builder *b, mp_drop *d, const mp_pcinfo *const *info, uint16_t *skip)
{
    mp_prune_match *m = malloc((b->nloc ? b->nloc : 1) * sizeof *m);
    if (m == NULL)
        return false;
    for (size_t i = 0; i < b->nloc; i++) {
        bool whole;
        int k =
            (uint32_t)i != b->marker && info[i] != NULL ? outermost_match(d, info[i], &whole) : -1;
        m[i] = k < 0 ? MP_PRUNE_NONE : whole ? MP_PRUNE_WHOLE : MP_PRUNE_INNER;
        skip[i] = m[i] == MP_PRUNE_INNER ? (uint16_t)(k + 1) : 0;
    }
    for (size_t s = 0; s < b->nsmp; s++) {
        mp_bsample *o = &b->smp[s];
        stack_view v = {b->stk + o->off, m};
        size_t cut = mp_prune_cut(o->depth, match_at, &v);
        o->off += cut;
        o->depth -= (uint32_t)cut;
    }
    free(m);
    return true;
}
