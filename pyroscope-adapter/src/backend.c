/* SPDX-License-Identifier: MIT */
/* The generic backend handle: a vtable and its state. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend_internal.h"

mp_pyro_status mp_pyro_backend_new(const mp_pyro_backend_ops *ops, void *state,
                                   mp_pyro_backend **out)
{
    if (!ops || !out || !ops->name || !ops->start || !ops->report || !ops->release || !ops->stop ||
        !ops->destroy)
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_backend *b = calloc(1, sizeof *b);
    if (!b)
        return MP_PYRO_E_NOMEM;
    b->ops = ops;
    b->state = state;
    atomic_init(&b->in_use, false);
    *out = b;
    return MP_PYRO_OK;
}

void mp_pyro_backend_free(mp_pyro_backend *b)
{
    if (!b)
        return;
    b->ops->destroy(b->state);
    free(b);
}

const char *mp_pyro_backend_name(const mp_pyro_backend *b)
{
    return b ? b->ops->name(b->state) : "";
}

const char *mp_pyro_backend_error(const mp_pyro_backend *b) { return b ? b->error : ""; }

mp_pyro_status mp_pyro_backend_prof_fail(mp_pyro_backend *b, mp_prof_status s, const char *what)
{
    if (s == MP_PROF_OK)
        return MP_PYRO_OK;
    mp_pyro_backend_fail(b, MP_PYRO_E_BACKEND, "%s: %s", what, mp_prof_strerror(s));
    switch (s) {
    case MP_PROF_E_NOMEM:
        return MP_PYRO_E_NOMEM;
    case MP_PROF_E_INACTIVE:
        return MP_PYRO_E_STATE;
    case MP_PROF_E_UNSUPPORTED:
        return MP_PYRO_E_UNSUPPORTED;
    default:
        return MP_PYRO_E_BACKEND;
    }
}

mp_pyro_status mp_pyro_backend_fail(mp_pyro_backend *b, mp_pyro_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->error, sizeof b->error, fmt, ap);
    va_end(ap);
    return s;
}
