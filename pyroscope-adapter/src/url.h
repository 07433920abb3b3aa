/* SPDX-License-Identifier: MIT */
/* Server URL normalisation and endpoint URLs. Not installed. */
#ifndef MP_PYRO_URL_H
#define MP_PYRO_URL_H

#include <mimprof/pyroscope.h>

/* Parses `url`: absolute http(s) with a host, no fragment. On success
 * `*base` (malloc) is the URL without userinfo, query or trailing '/', and
 * `*user` / `*password` (malloc, may be NULL) the decoded userinfo. */
mp_pyro_status mp_pyro_url_parse(const char *url, char **base, char **user, char **password,
                                 char *err, size_t errlen);

#endif
