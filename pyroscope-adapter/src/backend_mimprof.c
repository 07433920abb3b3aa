/* SPDX-License-Identifier: MIT */
/* The mimprof profiler as a backend. Its profiles carry interval samples (alloc_*,
 * label __delta__="false") and the live snapshot (inuse_*), already
 * unbiased by the profiler's estimator: nothing is rescaled here. */
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"

#include <mimprof/profiling.h>

typedef struct mimprof_state {
    mp_pyro_backend *self;
    bool owns_session;
    bool has_cfg;
    mp_prof_config cfg;
    mp_profiler *prof;
} mimprof_state;

static const char *m_name(void *st)
{
    (void)st;
    return "mimprof";
}

static mp_pyro_status m_start(void *st)
{
    mimprof_state *m = st;
    if (!m->owns_session)
        return m->prof ? MP_PYRO_OK : MP_PYRO_E_STATE;
    if (m->prof)
        return MP_PYRO_E_STATE;
    mp_prof_config def;
    if (!m->has_cfg)
        mp_prof_config_init(&def);
    return mp_pyro_backend_prof_fail(
        m->self, mp_profiler_start(m->has_cfg ? &m->cfg : &def, &m->prof), "mp_profiler_start");
}

static mp_pyro_status m_report(void *st, const mp_pyro_window *w, mp_pyro_profile *out)
{
    mimprof_state *m = st;
    (void)w; /* the profiler stamps its own time_nanos/duration */
    if (!m->prof)
        return MP_PYRO_E_STATE;
    uint8_t *p = NULL;
    size_t len = 0;
    mp_pyro_status s = mp_pyro_backend_prof_fail(m->self, mp_profiler_report(m->prof, &p, &len),
                                                 "mp_profiler_report");
    if (s != MP_PYRO_OK)
        return s;
    out->pprof = p;
    out->len = len;
    out->flags = MP_PYRO_PROFILE_INTERVAL | MP_PYRO_PROFILE_LIVE;
    return MP_PYRO_OK;
}

/* The peak of the window m_report just closed (mp_profiler_report_peak). */
static mp_pyro_status m_peak(void *st, mp_pyro_profile *out)
{
    mimprof_state *m = st;
    if (!m->prof)
        return MP_PYRO_E_STATE;
    uint8_t *p = NULL;
    size_t len = 0;
    mp_pyro_status s = mp_pyro_backend_prof_fail(
        m->self, mp_profiler_report_peak(m->prof, &p, &len, NULL), "mp_profiler_report_peak");
    if (s != MP_PYRO_OK)
        return s;
    out->pprof = p;
    out->len = len;
    out->flags = MP_PYRO_PROFILE_LIVE;
    return MP_PYRO_OK;
}

static void m_release(void *st, mp_pyro_profile *p)
{
    (void)st;
    mp_prof_buffer_free(p->pprof);
    p->pprof = NULL;
    p->len = 0;
}

static mp_pyro_status m_stop(void *st)
{
    mimprof_state *m = st;
    if (!m->owns_session || !m->prof)
        return MP_PYRO_OK;
    mp_prof_status s = mp_profiler_stop(m->prof);
    mp_profiler_free(m->prof);
    m->prof = NULL;
    return mp_pyro_backend_prof_fail(m->self, s, "mp_profiler_stop");
}

static void m_destroy(void *st)
{
    mimprof_state *m = st;
    if (m->owns_session && m->prof)
        mp_profiler_free(m->prof);
    free(m);
}

static const mp_pyro_backend_ops mimprof_ops = {
    .name = m_name,
    .start = m_start,
    .report = m_report,
    .release = m_release,
    .stop = m_stop,
    .destroy = m_destroy,
};

static mp_pyro_status make(mimprof_state *m, mp_pyro_backend **out)
{
    mp_pyro_status s = mp_pyro_backend_new(&mimprof_ops, m, out);
    if (s != MP_PYRO_OK) {
        free(m);
        return s;
    }
    m->self = *out;
    (*out)->peak = m_peak;
    return MP_PYRO_OK;
}

mp_pyro_status mp_pyro_backend_mimprof_new(const struct mp_prof_config *cfg, mp_pyro_backend **out)
{
    if (!out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mimprof_state *m = calloc(1, sizeof *m);
    if (!m)
        return MP_PYRO_E_NOMEM;
    m->owns_session = true;
    if (cfg) {
        m->cfg = *cfg;
        m->has_cfg = true;
    }
    return make(m, out);
}

mp_pyro_status mp_pyro_backend_mimprof_attach(struct mp_profiler *p, mp_pyro_backend **out)
{
    if (!p || !out)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mimprof_state *m = calloc(1, sizeof *m);
    if (!m)
        return MP_PYRO_E_NOMEM;
    m->prof = p;
    return make(m, out);
}
