/* SPDX-License-Identifier: MIT */
/* The backend handle behind the opaque mp_pyro_backend. Not installed. */
#ifndef MP_PYRO_BACKEND_INTERNAL_H
#define MP_PYRO_BACKEND_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include <mimprof/profiling.h>
#include <mimprof/pyroscope.h>

#include "util.h"

struct mp_pyro_backend {
    const mp_pyro_backend_ops *ops;
    void *state;
    atomic_bool in_use; /* claimed by an agent */
    /* Set by the mimprof backend only (not part of the public vtable):
     * the peak of the window the last report() closed, taken right after
     * it and uploaded as its own profile types (MP_PYRO_PEAK_PREFIX);
     * released with ops->release. */
    mp_pyro_status (*peak)(void *state, mp_pyro_profile *out);
    char error[MP_PYRO_ERRLEN];
};

/* Records the backend's failure sentence; returns `s`. */
mp_pyro_status mp_pyro_backend_fail(mp_pyro_backend *b, mp_pyro_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A profiling library call's failure as the backend's: records "what:
 * <mp_prof_strerror>" and returns the matching status (MP_PYRO_OK for
 * MP_PROF_OK, nothing recorded). */
mp_pyro_status mp_pyro_backend_prof_fail(mp_pyro_backend *b, mp_prof_status s, const char *what);

#endif
