/* Sending one gzipped profile: request building + transport. Shared by
 * the agent's uploader and mp_pyro_upload(). Not installed. */
#ifndef MP_PYRO_UPLOAD_H
#define MP_PYRO_UPLOAD_H

#include "http.h"

/* `*body_len` receives the request body size. */
void mp_pyro_send_profile(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_series *series,
                          const char *spy, const uint8_t *gz, size_t gz_len, int64_t from_ns,
                          int64_t until_ns, mp_pyro_rng *rng, const _Atomic int64_t *abort_at,
                          mp_pyro_http_result *res, size_t *body_len);

#endif
