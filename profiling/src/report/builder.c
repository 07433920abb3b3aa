/* SPDX-License-Identifier: MIT */
/* The report builder: aggregated samples in, each stack interned as a
 * list of location indices (one location per distinct return address),
 * equal (stack, kind, age bucket) triples summed (report_builder.h), and
 * the profile's comments kept. Encoding is
 * encode.c's job.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "../age.h"
#include "builder_state.h"
#include "report_internal.h"

mp_report_builder *mp_report_begin(mp_report_cache *cache, const mp_report_options *opt)
{
    if (cache == NULL || opt == NULL)
        return NULL;
    mp_syms_trim(cache->syms, &cache->maps, cache->budget);
    mp_report_cache_refresh(cache); /* a failed refresh keeps the last list */
    mp_report_builder *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->c = cache;
    b->opt = *opt;
    b->marker = MP_NO_LOC;
    return b;
}

void mp_report_abort(mp_report_builder *b)
{
    if (b == NULL)
        return;
    free(b->loc_pc);
    mp_index_free(&b->loc_ix);
    free(b->stk);
    free(b->smp);
    mp_index_free(&b->smp_ix);
    for (size_t i = 0; i < b->ncomments; i++)
        free(b->comments[i]);
    free(b->comments);
    free(b);
}

mp_prof_status mp_report_comment(mp_report_builder *b, const char *text)
{
    if (b == NULL || text == NULL)
        return MP_PROF_E_INTERNAL;
    char *c = strdup(text);
    if (c == NULL || !mp_array_reserve((void **)&b->comments, &b->comments_cap, b->ncomments + 1,
                                       sizeof *b->comments)) {
        free(c);
        return MP_PROF_E_NOMEM;
    }
    b->comments[b->ncomments++] = c;
    return MP_PROF_OK;
}

static uint32_t new_loc(mp_report_builder *b, uintptr_t pc)
{
    if (b->nloc >= MP_NO_LOC - 1 ||
        !mp_array_reserve((void **)&b->loc_pc, &b->loc_cap, b->nloc + 1, sizeof *b->loc_pc))
        return MP_NO_LOC;
    b->loc_pc[b->nloc] = pc;
    return (uint32_t)b->nloc++;
}

/* Room for its location must be reserved in loc_ix. */
static uint32_t loc_of(mp_report_builder *b, uintptr_t pc)
{
    mp_index_probe p = mp_index_start(&b->loc_ix, mp_hash_ptr(pc));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (b->loc_pc[i] == pc)
            return i;
    i = new_loc(b, pc);
    if (i != MP_NO_LOC)
        mp_index_put(&b->loc_ix, &p, i);
    return i;
}

mp_prof_status mp_report_add(mp_report_builder *b, const uintptr_t *pcs, size_t depth,
                             bool truncated, const double values[MP_VAL_COUNT], bool interval)
{
    return mp_report_add_aged(b, pcs, depth, truncated, values, interval, MP_AGE_NONE);
}

mp_prof_status mp_report_add_aged(mp_report_builder *b, const uintptr_t *pcs, size_t depth,
                                  bool truncated, const double values[MP_VAL_COUNT], bool interval,
                                  unsigned age_bucket)
{
    if (b == NULL || values == NULL || (pcs == NULL && depth > 0) || depth > UINT32_MAX - 1 ||
        (age_bucket != MP_AGE_NONE && (interval || age_bucket >= MP_AGE_BUCKETS)))
        return MP_PROF_E_INTERNAL;
    int8_t age = age_bucket == MP_AGE_NONE ? -1 : (int8_t)age_bucket;
    size_t n = depth + (truncated ? 1 : 0);
    if (b->nsmp >= UINT32_MAX - 1 ||
        !mp_array_reserve((void **)&b->stk, &b->stk_cap, b->nstk + n + 1, sizeof *b->stk) ||
        !mp_index_reserve(&b->smp_ix) || !mp_index_reserve_n(&b->loc_ix, depth))
        return MP_PROF_E_NOMEM;
    uint32_t *s = b->stk + b->nstk;
    uint64_t h = MP_HASH_SEED ^ (interval ? 0x9e37u : 0x7f4au) ^ ((uint64_t)(age + 1) << 20);
    for (size_t i = 0; i < depth; i++) {
        uint32_t l = loc_of(b, pcs[i]);
        if (l == MP_NO_LOC)
            return MP_PROF_E_NOMEM;
        s[i] = l;
        h = mp_hash_step(h, l);
    }
    if (truncated) {
        if (b->marker == MP_NO_LOC) {
            b->marker = new_loc(b, 0);
            if (b->marker == MP_NO_LOC)
                return MP_PROF_E_NOMEM;
        }
        s[depth] = b->marker;
        h = mp_hash_step(h, b->marker);
    }
    h = mp_hash_mix(h ^ n);
    mp_index_probe p = mp_index_start(&b->smp_ix, h);
    uint32_t i;
    while (mp_index_next(&p, &i)) {
        mp_bsample *o = &b->smp[i];
        if (o->hash == h && o->depth == n && o->interval == interval && o->age == age &&
            memcmp(b->stk + o->off, s, n * sizeof *s) == 0) {
            for (int k = 0; k < MP_VAL_COUNT; k++)
                o->v[k] += values[k];
            return MP_PROF_OK;
        }
    }
    if (!mp_array_reserve((void **)&b->smp, &b->smp_cap, b->nsmp + 1, sizeof *b->smp))
        return MP_PROF_E_NOMEM;
    mp_bsample *o = &b->smp[b->nsmp];
    o->hash = h;
    o->off = b->nstk;
    o->depth = (uint32_t)n;
    o->interval = interval;
    o->age = age;
    memcpy(o->v, values, sizeof o->v);
    mp_index_put(&b->smp_ix, &p, (uint32_t)b->nsmp++);
    b->nstk += n;
    return MP_PROF_OK;
}
