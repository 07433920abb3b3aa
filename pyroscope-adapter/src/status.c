/* SPDX-License-Identifier: MIT */
/* Status sentences and the package version. */
#include <mimprof/pyroscope.h>

#ifndef MP_PYRO_PACKAGE_VERSION
#define MP_PYRO_PACKAGE_VERSION "0.0.0"
#endif

const char *mp_pyro_strerror(mp_pyro_status s)
{
    switch (s) {
    case MP_PYRO_OK:
        return "success";
    case MP_PYRO_E_INVALID_ARGUMENT:
        return "invalid argument";
    case MP_PYRO_E_INVALID_CONFIG:
        return "invalid configuration";
    case MP_PYRO_E_INVALID_URL:
        return "invalid server URL";
    case MP_PYRO_E_INVALID_NAME:
        return "invalid application name";
    case MP_PYRO_E_INVALID_LABEL:
        return "invalid label";
    case MP_PYRO_E_TOO_MANY_LABELS:
        return "too many labels";
    case MP_PYRO_E_NOT_CONFIGURED:
        return "no server address or application name configured";
    case MP_PYRO_E_NOMEM:
        return "out of memory";
    case MP_PYRO_E_BACKEND:
        return "the profile backend failed";
    case MP_PYRO_E_UNSUPPORTED:
        return "not supported by this build or process";
    case MP_PYRO_E_STATE:
        return "operation not valid in the current state";
    case MP_PYRO_E_CONNECT:
        return "could not connect to the server";
    case MP_PYRO_E_TIMEOUT:
        return "the request timed out";
    case MP_PYRO_E_TLS:
        return "TLS handshake or certificate verification failed";
    case MP_PYRO_E_HTTP_REJECTED:
        return "the server rejected the request";
    case MP_PYRO_E_HTTP_RATE_LIMITED:
        return "the server is rate limiting (HTTP 429)";
    case MP_PYRO_E_HTTP_SERVER:
        return "server error (HTTP 5xx)";
    case MP_PYRO_E_IO:
        return "file input/output error";
    case MP_PYRO_E_SPOOL_LOCKED:
        return "the spool directory is used by another agent";
    case MP_PYRO_E_DEADLINE:
        return "profiles were left undelivered at the flush deadline";
    case MP_PYRO_E_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

bool mp_pyro_status_is_retryable(mp_pyro_status s)
{
    return s == MP_PYRO_E_CONNECT || s == MP_PYRO_E_TIMEOUT || s == MP_PYRO_E_HTTP_RATE_LIMITED ||
           s == MP_PYRO_E_HTTP_SERVER;
}

const char *mp_pyro_version(void) { return MP_PYRO_PACKAGE_VERSION; }
