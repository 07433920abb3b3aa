/* SPDX-License-Identifier: MIT */
/* The fixed-bytes test backend: fixed_values() encoded by tp_build_heap(),
 * recording the windows it was asked for. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* --- the fixed backend ------------------------------------------------------ */

static const char *fb_name(void *st)
{
    (void)st;
    return "fixed-test";
}

static mp_pyro_status fb_start(void *st)
{
    fixed_backend *f = st;
    pthread_mutex_lock(&f->mu);
    f->started = true;
    pthread_mutex_unlock(&f->mu);
    return MP_PYRO_OK;
}

static mp_pyro_status fb_report(void *st, const mp_pyro_window *w, mp_pyro_profile *out)
{
    fixed_backend *f = st;
    pthread_mutex_lock(&f->mu);
    int k = f->reports++;
    if (f->nwindows < 4096)
        f->windows[f->nwindows++] = *w;
    bool fail = k == f->fail_at, empty = f->empty;
    tp_heap_values v;
    fixed_values(k, &v);
    if (!fail && !empty) {
        f->sum_alloc_space += v.alloc_space[0] + v.alloc_space[1];
        f->sum_inuse_space += v.inuse_space[0] + v.inuse_space[1];
    }
    pthread_mutex_unlock(&f->mu);
    if (fail)
        return MP_PYRO_E_BACKEND;
    if (empty)
        return MP_PYRO_OK;
    out->pprof = tp_build_heap(&v, w->from_nanos, w->until_nanos - w->from_nanos, true, &out->len);
    out->flags = MP_PYRO_PROFILE_INTERVAL | MP_PYRO_PROFILE_LIVE;
    return MP_PYRO_OK;
}

static void fb_release(void *st, mp_pyro_profile *p)
{
    (void)st;
    free(p->pprof);
}

static mp_pyro_status fb_stop(void *st)
{
    fixed_backend *f = st;
    pthread_mutex_lock(&f->mu);
    f->stopped = true;
    pthread_mutex_unlock(&f->mu);
    return MP_PYRO_OK;
}

static void fb_destroy(void *st)
{
    fixed_backend *f = st;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static const mp_pyro_backend_ops fixed_ops = {
    .name = fb_name,
    .start = fb_start,
    .report = fb_report,
    .release = fb_release,
    .stop = fb_stop,
    .destroy = fb_destroy,
};

mp_pyro_backend *fixed_backend_new(fixed_backend **state)
{
    fixed_backend *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->fail_at = -1;
    mp_pyro_backend *b = NULL;
    if (mp_pyro_backend_new(&fixed_ops, f, &b) != MP_PYRO_OK) {
        fb_destroy(f);
        return NULL;
    }
    *state = f;
    return b;
}

void fixed_snapshot(fixed_backend *f, int *reports, int64_t *alloc_space, int64_t *inuse_space)
{
    pthread_mutex_lock(&f->mu);
    if (reports)
        *reports = f->reports;
    if (alloc_space)
        *alloc_space = f->sum_alloc_space;
    if (inuse_space)
        *inuse_space = f->sum_inuse_space;
    pthread_mutex_unlock(&f->mu);
}
