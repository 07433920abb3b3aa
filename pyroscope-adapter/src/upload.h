/* SPDX-License-Identifier: MIT */
/* Sending one gzipped profile: request building + transport. Shared by
 * the agent's uploader and mp_pyro_upload(). Not installed. */
#ifndef MP_PYRO_UPLOAD_H
#define MP_PYRO_UPLOAD_H

#include <pthread.h>

#include "http.h"
#include "queue.h"
#include "stamp.h"

/* `*body_len` receives the request body size. */
void mp_pyro_send_profile(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_series *series,
                          const char *spy, const uint8_t *gz, size_t gz_len, int64_t from_ns,
                          int64_t until_ns, mp_pyro_rng *rng, const _Atomic int64_t *abort_at,
                          mp_pyro_http_result *res, size_t *body_len);

/* Makes one report ready to send: fitted to cfg's server limits (fit.h)
 * and each part gzipped, in `*items` (`*n` of them, malloc()ed, with the
 * window). The per-request byte bound is the smaller of the profile size
 * limit and the rate-limit burst, less the series' label bytes, which the
 * server's rate limiter counts too. Each part's time_nanos is its own
 * (stamp.h), kept increasing per residue by `stamper` when not NULL
 * (taken under `stamper_mu` when not NULL). MP_PYRO_E_INVALID_ARGUMENT
 * with a sentence in `err` when the profile cannot be read or fitted. */
mp_pyro_status mp_pyro_prepare(const mp_pyro_config *cfg, const char *spy, const uint8_t *pprof,
                               size_t len, int64_t from_ns, int64_t until_ns,
                               mp_pyro_stamper *stamper, pthread_mutex_t *stamper_mu,
                               mp_pyro_item **items, size_t *n, char *err, size_t errlen);

#endif
