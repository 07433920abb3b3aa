/* The backend handle behind the opaque mp_pyro_backend. Not installed. */
#ifndef MP_PYRO_BACKEND_INTERNAL_H
#define MP_PYRO_BACKEND_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include <mimprof/pyroscope.h>

#include "util.h"

struct mp_pyro_backend {
    const mp_pyro_backend_ops *ops;
    void *state;
    atomic_bool in_use; /* claimed by an agent */
    char error[MP_PYRO_ERRLEN];
};

/* Records the backend's failure sentence; returns `s`. */
mp_pyro_status mp_pyro_backend_fail(mp_pyro_backend *b, mp_pyro_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
