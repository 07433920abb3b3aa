/* SPDX-License-Identifier: MIT */
/* Foreign stacks as pprof (<mimprof/profiling_pprof.h>): the public face
 * of the report side's own cache, builder and encoder (report_builder.h),
 * which mp_profiler_report() uses for the recorder's stacks. */
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling_pprof.h>

#include "internal.h"
#include "report/drop.h"
#include "report/elf_reader.h"
#include "report/maps.h"
#include "report/report_internal.h"
#include "report/symbols.h"

struct mp_prof_symbolizer {
    mp_report_cache *cache;
};

struct mp_prof_pprof {
    mp_report_builder *b;
    const mp_maps *maps;
    bool inuse_only;
    uint32_t cut_obj; /* index into maps->objs of the object to cut, UINT32_MAX = none */
};

mp_prof_status mp_prof_symbolizer_new(mp_prof_symbolizer **out)
{
    if (out == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_guard_enter();
    mp_prof_symbolizer *s = calloc(1, sizeof *s);
    if (s != NULL && (s->cache = mp_report_cache_new()) == NULL) {
        free(s);
        s = NULL;
    }
    mp_guard_exit();
    if (s == NULL)
        return MP_PROF_E_NOMEM;
    *out = s;
    return MP_PROF_OK;
}

void mp_prof_symbolizer_free(mp_prof_symbolizer *s)
{
    if (s == NULL)
        return;
    mp_guard_enter();
    mp_report_cache_free(s->cache);
    free(s);
    mp_guard_exit();
}

static bool overlaps_added(const mp_maps *maps, uint64_t start, uint64_t limit)
{
    for (size_t i = 0; i < maps->nindex; i++)
        if (maps->index[i].start < limit && start < maps->index[i].limit)
            return true;
    return false;
}

static mp_prof_status add_mapping(mp_maps *maps, const mp_prof_mapping *m)
{
    const char *id = m->build_id != NULL ? m->build_id : "";
    if (!maps->fixed && maps->valid)
        return MP_PROF_E_INVALID_CONFIG; /* this process's objects were read: too late */
    if (m->start >= m->limit || m->limit > UINTPTR_MAX || m->path == NULL ||
        strlen(id) > 2 * MP_ELF_BUILD_ID_MAX || overlaps_added(maps, m->start, m->limit))
        return MP_PROF_E_INVALID_CONFIG;
    mp_obj *o = calloc(1, sizeof *o);
    if (o == NULL)
        return MP_PROF_E_NOMEM;
    o->path = strdup(m->path);
    o->segs = malloc(sizeof *o->segs);
    if (o->path == NULL || o->segs == NULL) {
        mp_obj_free(o);
        return MP_PROF_E_NOMEM;
    }
    o->segs[0] = (mp_map_seg){(uintptr_t)m->start, (uintptr_t)m->limit, m->file_offset};
    o->nsegs = 1;
    /* The load bias from the object's own program headers where the file
     * is there to read (its segment may start at an address other than
     * its offset: lld's layout), else start - file_offset. */
    uint64_t vaddr;
    o->base =
        (uintptr_t)(m->path[0] == '/' && mp_elf_file_segment_vaddr(m->path, m->file_offset, &vaddr)
                        ? m->start - vaddr
                        : m->start - m->file_offset);
    o->has_file = m->path[0] == '/';
    o->loaded = true;
    memcpy(o->build_id, id, strlen(id) + 1);
    if (!mp_maps_add(maps, o)) {
        mp_obj_free(o);
        return MP_PROF_E_NOMEM;
    }
    return MP_PROF_OK;
}

mp_prof_status mp_prof_symbolizer_add_mapping(mp_prof_symbolizer *s, const mp_prof_mapping *m)
{
    if (s == NULL || m == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_guard_enter();
    mp_prof_status st = add_mapping(mp_report_cache_maps(s->cache), m);
    mp_guard_exit();
    return st;
}

void mp_prof_pprof_options_init(mp_prof_pprof_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
    o->inuse_only = true;
}

/* The object whose innermost frames are cut, UINT32_MAX for none. */
static uint32_t cut_object(const mp_maps *maps, uintptr_t code)
{
    const mp_map_ref *r = code != 0 ? mp_maps_lookup(maps, code) : NULL;
    return r != NULL && !maps->objs[r->obj]->is_main ? r->obj : UINT32_MAX;
}

mp_prof_status mp_prof_pprof_begin(mp_prof_symbolizer *s, const mp_prof_pprof_options *o,
                                   mp_prof_pprof **out)
{
    if (s == NULL || o == NULL || out == NULL || o->symbolize < MP_PROF_SYMBOLIZE_NONE ||
        o->symbolize > MP_PROF_SYMBOLIZE_LINES)
        return MP_PROF_E_INVALID_CONFIG;
    if (o->symbolize == MP_PROF_SYMBOLIZE_LINES && !mp_syms_have_lines())
        return MP_PROF_E_UNSUPPORTED;
    mp_report_options ro = {
        .period = o->period,
        .time_nanos = o->time_nanos,
        .duration_nanos = o->duration_nanos,
        .symbolize = o->symbolize,
        .inuse_only = o->inuse_only,
    };
    mp_guard_enter();
    mp_prof_pprof *p = calloc(1, sizeof *p);
    if (p != NULL && (p->b = mp_report_begin(s->cache, &ro)) == NULL) {
        free(p);
        p = NULL;
    }
    if (p != NULL) {
        p->maps = mp_report_cache_maps(s->cache);
        p->inuse_only = o->inuse_only;
        p->cut_obj = cut_object(p->maps, o->cut_object_of);
    }
    mp_guard_exit();
    if (p == NULL)
        return MP_PROF_E_NOMEM;
    *out = p;
    return MP_PROF_OK;
}

/* The object holding return address `pc`, UINT32_MAX for none. */
static uint32_t object_of(const mp_maps *maps, uintptr_t pc)
{
    const mp_map_ref *r = mp_maps_lookup(maps, pc - 1);
    return r != NULL ? r->obj : UINT32_MAX;
}

mp_prof_status mp_prof_pprof_add(mp_prof_pprof *p, const uintptr_t *pcs, size_t depth,
                                 const double *values, size_t nvalues)
{
    if (p == NULL || values == NULL || (pcs == NULL && depth > 0) || depth > UINT32_MAX - 1 ||
        nvalues != (p->inuse_only ? 2u : (size_t)MP_VAL_COUNT))
        return MP_PROF_E_INVALID_CONFIG;
    double v[MP_VAL_COUNT] = {0};
    memcpy(v + (MP_VAL_COUNT - nvalues), values, nvalues * sizeof *v);
    size_t k = 0;
    if (p->cut_obj != UINT32_MAX) {
        while (k < depth && object_of(p->maps, pcs[k]) == p->cut_obj)
            k++;
        if (k == depth)
            k = 0; /* nothing but the cut object's frames: keep them, not an empty stack */
    }
    mp_guard_enter();
    mp_prof_status st = mp_report_add(p->b, pcs + k, depth - k, false, v, false);
    mp_guard_exit();
    return st == MP_PROF_E_INTERNAL ? MP_PROF_E_INVALID_CONFIG : st;
}

mp_prof_status mp_prof_pprof_comment(mp_prof_pprof *p, const char *text)
{
    if (p == NULL || text == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_guard_enter();
    mp_prof_status st = mp_report_comment(p->b, text);
    mp_guard_exit();
    return st;
}

mp_prof_status mp_prof_pprof_finish(mp_prof_pprof *p, uint8_t **out, size_t *len)
{
    if (p == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    if (out == NULL || len == NULL) {
        mp_prof_pprof_abort(p);
        return MP_PROF_E_INVALID_CONFIG;
    }
    mp_guard_enter();
    mp_prof_status st = mp_report_finish(p->b, out, len);
    free(p);
    mp_guard_exit();
    return st;
}

void mp_prof_pprof_abort(mp_prof_pprof *p)
{
    if (p == NULL)
        return;
    mp_guard_enter();
    mp_report_abort(p->b);
    free(p);
    mp_guard_exit();
}

mp_prof_status mp_prof_pprof_prune(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen)
{
    if (in == NULL || out == NULL || outlen == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_guard_enter();
    mp_prof_status st = mp_report_prune_pprof(in, len, out, outlen);
    mp_guard_exit();
    return st;
}
