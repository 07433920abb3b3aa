/* SPDX-License-Identifier: MIT */
/* What happens to a profile after a failed attempt, and when the next
 * attempt may start. Not installed. */
#ifndef MP_PYRO_RETRY_H
#define MP_PYRO_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include <mimprof/pyroscope.h>

#include "util.h"

typedef enum mp_pyro_fate {
    MP_PYRO_FATE_DONE = 0,  /* delivered */
    MP_PYRO_FATE_RETRY = 1, /* 429, 5xx, timeout, connection: try again after a backoff */
    MP_PYRO_FATE_KEEP = 2,  /* the request cannot succeed as configured but the profile is
                               fine (TLS, auth 401/403, 404/405, redirects): spool it */
    MP_PYRO_FATE_REJECT = 3 /* the server refused the content (400, 413, 422...): drop */
} mp_pyro_fate;

mp_pyro_fate mp_pyro_failure_fate(mp_pyro_status st, long http_code);

/* The status of a 422 from the message of its JSON body. /ingest answers
 * 422 for validation errors (permanent: MP_PYRO_E_HTTP_REJECTED) and also
 * for rate limits (MP_PYRO_E_HTTP_RATE_LIMITED) and ingester errors
 * (MP_PYRO_E_HTTP_SERVER), which Push answers with 429 and 5xx; the
 * message is all that tells them apart. */
mp_pyro_status mp_pyro_classify_422(const char *message);

/* True when `a` and `b` differ at most in their numbers (one log line per
 * kind of rejection, not per profile). */
bool mp_pyro_same_message(const char *a, const char *b);

/* Delay before attempt number `attempts_done + 1` (attempts_done >= 1):
 * initial * 2^(attempts_done-1) capped at max, then drawn uniformly in
 * [d/2, d] (jitter). */
int64_t mp_pyro_backoff_ns(const mp_pyro_retry_policy *p, uint32_t attempts_done, mp_pyro_rng *rng);

/* True when another attempt is allowed: fewer than max_attempts made and
 * the next one would start within budget_ms of the first. */
bool mp_pyro_retry_allowed(const mp_pyro_retry_policy *p, uint32_t attempts_done,
                           int64_t first_attempt_ns, int64_t next_attempt_ns);

/* Adds one failure of status `st` to the per-class counters of `s`. */
void mp_pyro_count_failure(mp_pyro_stats *s, mp_pyro_status st);

#endif
