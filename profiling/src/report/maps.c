/* SPDX-License-Identifier: MIT */
/* Loaded objects and their executable segments (see maps.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "maps.h"

#include "../platform/platform.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mp_maps_init(mp_maps *m) { memset(m, 0, sizeof *m); }

static void drop(mp_maps *m, mp_obj *o)
{
    if (m->on_drop)
        m->on_drop(o, m->on_drop_arg);
    mp_obj_free(o);
}

void mp_maps_destroy(mp_maps *m)
{
    for (size_t i = 0; i < m->nobjs; i++)
        drop(m, m->objs[i]);
    free(m->objs);
    free(m->index);
    memset(m, 0, sizeof *m);
}

static int ref_cmp(const void *a, const void *b)
{
    const mp_map_ref *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static bool rebuild_index(mp_maps *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nobjs; i++)
        n += m->objs[i]->nsegs;
    mp_map_ref *idx = malloc((n ? n : 1) * sizeof *idx);
    if (idx == NULL)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < m->nobjs; i++)
        for (size_t j = 0; j < m->objs[i]->nsegs; j++) {
            idx[k].start = m->objs[i]->segs[j].start;
            idx[k].limit = m->objs[i]->segs[j].limit;
            idx[k].obj = (uint32_t)i;
            idx[k].seg = (uint32_t)j;
            idx[k].id = (uint32_t)(k + 1);
            k++;
        }
    qsort(idx, n, sizeof *idx, ref_cmp);
    free(m->index);
    m->index = idx;
    m->nindex = n;
    return true;
}

static bool same_obj(const mp_obj *a, const mp_obj *b)
{
    return a->base == b->base && a->nsegs == b->nsegs && a->segs[0].start == b->segs[0].start &&
           strcmp(a->path, b->path) == 0 && strcmp(a->build_id, b->build_id) == 0;
}

static bool overlaps(const mp_obj *a, const mp_obj *b)
{
    for (size_t i = 0; i < a->nsegs; i++)
        for (size_t j = 0; j < b->nsegs; j++)
            if (a->segs[i].start < b->segs[j].limit && b->segs[j].start < a->segs[i].limit)
                return true;
    return false;
}

bool mp_maps_refresh(mp_maps *m)
{
    if (m->fixed)
        return true;
    if (!mp_plat_caps_get()->mappings) { /* no loader enumeration: addresses only */
        m->valid = true;
        return true;
    }
    unsigned long long c[2] = {0, 0};
    bool counted = mp_plat_loader_counters(&c[0], &c[1]);
    if (m->valid && counted && c[0] == m->adds && c[1] == m->subs)
        return true;

    struct {
        mp_obj **found;
        size_t n;
    } s = {NULL, 0};
    if (!mp_plat_scan_objects(&s.found, &s.n))
        return false; /* out of memory: the old state is kept */
    if (s.n == 0) {
        free(s.found);
        return m->valid; /* keep the old state */
    }

    size_t total = s.n + m->nobjs;
    mp_obj **next = malloc(total * sizeof *next);
    bool *kept = calloc(m->nobjs ? m->nobjs : 1, sizeof *kept);
    if (next == NULL || kept == NULL) {
        free(next);
        free(kept);
        for (size_t i = 0; i < s.n; i++)
            mp_obj_free(s.found[i]);
        free(s.found);
        return false;
    }
    m->refreshes++;
    size_t n = 0;
    /* Loaded objects, in the loader's order (the main binary first). */
    for (size_t i = 0; i < s.n; i++) {
        mp_obj *o = s.found[i];
        for (size_t j = 0; j < m->nobjs; j++) {
            if (!kept[j] && same_obj(m->objs[j], o)) {
                kept[j] = true;
                mp_obj_free(o);
                o = m->objs[j];
                o->loaded = true;
                break;
            }
        }
        o->seen_refresh = m->refreshes;
        next[n++] = o;
    }
    size_t nloaded = n;
    /* Objects that went away: retained unless a loaded object now overlaps
     * them (the addresses mean something else now) or too many are kept. */
    size_t retained = 0;
    for (size_t j = 0; j < m->nobjs; j++) {
        if (kept[j])
            continue;
        mp_obj *o = m->objs[j];
        if (o->loaded)
            m->unloads++;
        o->loaded = false;
        bool clash = false;
        for (size_t i = 0; i < nloaded && !clash; i++)
            clash = overlaps(o, next[i]);
        for (size_t i = nloaded; i < n && !clash; i++)
            clash = overlaps(o, next[i]);
        if (clash || retained >= MP_MAPS_MAX_RETAINED) {
            drop(m, o);
            continue;
        }
        next[n++] = o;
        retained++;
    }
    free(kept);
    free(s.found);
    free(m->objs);
    m->objs = next;
    m->nobjs = n;
    m->cap = total;
    m->adds = c[0];
    m->subs = c[1];
    m->valid = counted;
    if (!rebuild_index(m)) {
        m->valid = false; /* retried at the next report */
        free(m->index);
        m->index = NULL;
        m->nindex = 0;
        return false;
    }
    return true;
}

bool mp_maps_add(mp_maps *m, mp_obj *o)
{
    if (m->nobjs == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 16;
        mp_obj **v = realloc(m->objs, nc * sizeof *v);
        if (v == NULL)
            return false;
        m->objs = v;
        m->cap = nc;
    }
    m->objs[m->nobjs++] = o;
    if (!rebuild_index(m)) {
        m->nobjs--;
        return false;
    }
    m->fixed = true;
    m->valid = true;
    return true;
}

const mp_map_ref *mp_maps_lookup(const mp_maps *m, uintptr_t addr)
{
    size_t lo = 0, hi = m->nindex;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const mp_map_ref *r = &m->index[mid];
        if (addr < r->start)
            hi = mid;
        else if (addr >= r->limit)
            lo = mid + 1;
        else
            return r;
    }
    return NULL;
}

size_t mp_maps_count(const mp_maps *m) { return m->nindex; }
