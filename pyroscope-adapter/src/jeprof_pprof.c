/* SPDX-License-Identifier: MIT */
/* A parsed jemalloc heap dump -> pprof, through the profiling library's
 * foreign-stack builder (jeprof_pprof.h). */
#include "jeprof_pprof.h"

#include <math.h>

mp_prof_status mp_jeprof_pprof(const mp_jeprof_dump *d, mp_prof_symbolizer *s,
                               const mp_jeprof_pprof_options *o, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    mp_prof_pprof_options po;
    mp_prof_pprof_options_init(&po);
    po.period = d->period;
    po.time_nanos = o->time_nanos;
    po.duration_nanos = o->duration_nanos;
    po.symbolize = o->symbolize;
    po.inuse_only = true;
    po.cut_object_of = o->allocator_code;
    mp_prof_pprof *p;
    mp_prof_status st = mp_prof_pprof_begin(s, &po, &p);
    if (st != MP_PROF_OK)
        return st;
    if (o->comment)
        st = mp_prof_pprof_comment(p, o->comment);
    for (size_t i = 0; i < d->nstacks && st == MP_PROF_OK; i++) {
        const mp_jeprof_stack *stk = &d->stacks[i];
        double v[2];
        mp_jeprof_unbias(stk->objs, stk->bytes, d->period, &v[0], &v[1]);
        if (llround(v[0]) == 0 && llround(v[1]) == 0)
            continue;
        /* heap_v2 frames are return addresses, as the builder takes them
         * (a 0 frame stays address 0). */
        uintptr_t pcs[MP_JEPROF_MAX_DEPTH];
        size_t n = stk->depth < MP_JEPROF_MAX_DEPTH ? stk->depth : MP_JEPROF_MAX_DEPTH;
        for (size_t k = 0; k < n; k++) {
            uint64_t f = d->frames[stk->frame_off + k];
            pcs[k] = f ? (uintptr_t)f : 1;
        }
        st = mp_prof_pprof_add(p, pcs, n, v, 2);
    }
    if (st != MP_PROF_OK) {
        mp_prof_pprof_abort(p);
        return st;
    }
    return mp_prof_pprof_finish(p, out, len);
}

mp_prof_status mp_jeprof_pprof_text(const char *text, size_t textlen, mp_prof_symbolizer *s,
                                    const mp_jeprof_pprof_options *o, uint8_t **out, size_t *len,
                                    char *err, size_t errlen)
{
    mp_jeprof_dump d;
    if (mp_jeprof_parse(text, textlen, &d, err, errlen) != 0) {
        *out = NULL;
        *len = 0;
        return MP_PROF_E_INVALID_CONFIG;
    }
    mp_prof_status st = mp_jeprof_pprof(&d, s, o, out, len);
    mp_jeprof_dump_free(&d);
    return st;
}
