/* SPDX-License-Identifier: MIT */
/* Pyroscope's naming rules (protocol reference, section 1) and the series
 * name `app{k=v,...}`. Pure functions: no allocation except where a
 * series is modified. Not installed. */
#ifndef MP_PYRO_LABELS_H
#define MP_PYRO_LABELS_H

#include <stdbool.h>
#include <stddef.h>

#include "config_internal.h"

#define MP_PYRO_MAX_NAME_LEN  1024 /* label name, and our bound on the application name */
#define MP_PYRO_MAX_VALUE_LEN 2048 /* label value */

bool mp_pyro_utf8_valid(const char *s, size_t n);

/* Each returns MP_PYRO_OK or a typed error with a sentence in err. */
mp_pyro_status mp_pyro_check_app_name(const char *s, char *err, size_t errlen);
mp_pyro_status mp_pyro_check_label_name(const char *s, char *err, size_t errlen);
mp_pyro_status mp_pyro_check_label_value(const char *name, const char *v, char *err, size_t errlen);
mp_pyro_status mp_pyro_check_tenant(const char *s, char *err, size_t errlen);
mp_pyro_status mp_pyro_check_header(const char *name, const char *value, char *err, size_t errlen);

/* Adds one validated tag, keeping tags sorted by name. */
mp_pyro_status mp_pyro_series_add_tag(mp_pyro_series *s, const char *name, const char *value,
                                      char *err, size_t errlen);
/* Adds `k=v,k2=v2` (blanks around items ignored); all or nothing. */
mp_pyro_status mp_pyro_series_add_tags(mp_pyro_series *s, const char *list, char *err,
                                       size_t errlen);

/* Appends `app{k=v,k2=v2}` (or `app` without tags) to `out`. */
void mp_pyro_series_name(const mp_pyro_series *s, mp_pyro_buf *out);

#endif
