/* SPDX-License-Identifier: MIT */
/* The configuration object behind the opaque mp_pyro_config. Not installed. */
#ifndef MP_PYRO_CONFIG_INTERNAL_H
#define MP_PYRO_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/pyroscope.h>

#include "util.h"

#define MP_PYRO_MAX_HEADERS 32

/* Pyroscope refuses profiles whose time_nanos is older than 1 h
 * (validation.reject-older-than); profiles are stamped with their
 * window's start. A window lasts at most half of it, and the spool keeps
 * a profile until 55 min after its start (5 min left for the request). */
#define MP_PYRO_MAX_INTERVAL_MS 1800000u
#define MP_PYRO_MAX_SPOOL_AGE_S 3300u

typedef struct mp_pyro_kv {
    char *name;
    char *value;
} mp_pyro_kv;

/* What identifies a series: the application name and the static tags
 * (kept sorted by name). The spool stores it with each profile. */
typedef struct mp_pyro_series {
    char *app;
    mp_pyro_kv tags[MP_PYRO_MAX_TAGS];
    size_t ntags;
} mp_pyro_series;

struct mp_pyro_config {
    char *server; /* base URL, no userinfo, no trailing '/' */
    mp_pyro_series series;
    char *basic_user;
    char *basic_password;
    bool basic_explicit; /* set by mp_pyro_config_set_basic_auth, not from the URL */
    char *bearer;
    char *tenant;
    mp_pyro_kv headers[MP_PYRO_MAX_HEADERS];
    size_t nheaders;
    mp_pyro_protocol protocol;
    uint32_t interval_ms;
    uint32_t connect_timeout_ms;
    uint32_t request_timeout_ms;
    uint32_t queue_capacity;
    uint32_t flush_deadline_ms;
    mp_pyro_retry_policy retry;
    mp_pyro_server_limits limits;
    char *ca_path;
    char *spool_dir;
    uint64_t spool_max_bytes;
    uint32_t spool_max_age_s;
    mp_pyro_log_level log_level;
    mp_pyro_log_fn log_fn;
    void *log_user;
    char error[MP_PYRO_ERRLEN];
};

/* Records `s` and its sentence in cfg->error; returns `s`. */
mp_pyro_status mp_pyro_config_fail(mp_pyro_config *cfg, mp_pyro_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Series helpers (labels.c). */
void mp_pyro_series_clear(mp_pyro_series *s);
mp_pyro_status mp_pyro_series_copy(const mp_pyro_series *src, mp_pyro_series *dst);

#endif
