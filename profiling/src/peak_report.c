/* SPDX-License-Identifier: MIT */
/* mp_profiler_report_peak: the peak set the last report kept (peak.c,
 * session.c) as an in-use-only pprof whose comments give the peak's size
 * and time. Encoded on demand, so a caller that never asks pays only the
 * per-stack sums the report kept. */
#include "internal.h"
#include "peak.h"
#include "session.h"

static mp_prof_status encode_locked(mp_profiler *p, uint8_t **out, size_t *len)
{
    if (p->cache == NULL && (p->cache = mp_report_cache_new()) == NULL)
        return MP_PROF_E_NOMEM;
    const mp_prof_peak_info *pi = &p->peak_info;
    mp_report_options opt = {
        .period = p->cfg.sample_interval_bytes,
        .time_nanos = pi->window_start_nanos,
        .duration_nanos = pi->window_end_nanos - pi->window_start_nanos,
        .symbolize = p->cfg.symbolize,
        .inuse_only = true,
    };
    mp_report_builder *b = mp_report_begin(p->cache, &opt);
    if (b == NULL)
        return MP_PROF_E_NOMEM;
    mp_prof_status st = pi->window_end_nanos != 0 ? mp_peak_comments(b, pi) : MP_PROF_OK;
    for (size_t i = 0; st == MP_PROF_OK && i < p->peak.count; i++) {
        const mp_agg_entry *e = &p->peak.e[i];
        if (e->n_live == 0)
            continue;
        double v[MP_VAL_COUNT] = {0, 0, e->v[MP_VAL_INUSE_OBJECTS], e->v[MP_VAL_INUSE_SPACE]};
        st = mp_report_add(b, e->stack->pcs, e->stack->depth, e->stack->truncated != 0, v, false);
    }
    if (st != MP_PROF_OK) {
        mp_report_abort(b);
        return st;
    }
    return mp_report_finish(b, out, len);
}

mp_prof_status mp_profiler_report_peak(mp_profiler *p, uint8_t **pprof, size_t *len,
                                       mp_prof_peak_info *info)
{
    if (p == NULL || pprof == NULL || len == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_prof_status st;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (!mp_session_owns_locked(p)) {
        st = MP_PROF_E_INACTIVE;
    } else {
        st = encode_locked(p, pprof, len);
        if (st == MP_PROF_OK && info != NULL)
            *info = p->peak_info;
    }
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
}
