/* SPDX-License-Identifier: MIT */
/* Retry policy: exponential backoff with jitter inside a budget. */
#include "retry.h"

#include <string.h>

mp_pyro_status mp_pyro_classify_422(const char *message)
{
    /* "pushing IngestInput-pprof failed <error>" is every failure after
     * parsing (ingest_adapter.go); <error> carries its Connect code. Only
     * invalid_argument (validation) is the profile's fault; the rest are
     * rate and ingestion limits or ingester/segment-writer trouble. */
    if (!strstr(message, "pushing IngestInput-pprof failed") || strstr(message, "invalid_argument"))
        return MP_PYRO_E_HTTP_REJECTED;
    return strstr(message, "resource_exhausted") ? MP_PYRO_E_HTTP_RATE_LIMITED
                                                 : MP_PYRO_E_HTTP_SERVER;
}

bool mp_pyro_same_message(const char *a, const char *b)
{
    for (;;) {
        bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da && db) {
            while (*a >= '0' && *a <= '9')
                a++;
            while (*b >= '0' && *b <= '9')
                b++;
            continue;
        }
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}

mp_pyro_fate mp_pyro_failure_fate(mp_pyro_status st, long http_code)
{
    switch (st) {
    case MP_PYRO_OK:
        return MP_PYRO_FATE_DONE;
    case MP_PYRO_E_CONNECT:
    case MP_PYRO_E_TIMEOUT:
    case MP_PYRO_E_HTTP_RATE_LIMITED:
    case MP_PYRO_E_HTTP_SERVER:
        return MP_PYRO_FATE_RETRY;
    case MP_PYRO_E_HTTP_REJECTED:
        if ((http_code >= 300 && http_code < 400) || http_code == 401 || http_code == 403 ||
            http_code == 404 || http_code == 405 || http_code == 407)
            return MP_PYRO_FATE_KEEP;
        return MP_PYRO_FATE_REJECT;
    default:
        return MP_PYRO_FATE_KEEP;
    }
}

int64_t mp_pyro_backoff_ns(const mp_pyro_retry_policy *p, uint32_t attempts_done, mp_pyro_rng *rng)
{
    uint64_t d = p->initial_backoff_ms;
    for (uint32_t i = 1; i < attempts_done && d < p->max_backoff_ms; i++)
        d *= 2;
    if (d > p->max_backoff_ms)
        d = p->max_backoff_ms;
    uint64_t d_ns = d * 1000000u;
    uint64_t half = d_ns / 2;
    uint64_t jitter = half ? mp_pyro_rng_next(rng) % (half + 1) : 0;
    return (int64_t)(half + jitter + (d_ns & 1));
}

bool mp_pyro_retry_allowed(const mp_pyro_retry_policy *p, uint32_t attempts_done,
                           int64_t first_attempt_ns, int64_t next_attempt_ns)
{
    if (attempts_done >= p->max_attempts)
        return false;
    return next_attempt_ns - first_attempt_ns <= (int64_t)p->budget_ms * 1000000;
}

void mp_pyro_count_failure(mp_pyro_stats *s, mp_pyro_status st)
{
    switch (st) {
    case MP_PYRO_E_CONNECT:
        s->fail_connect++;
        break;
    case MP_PYRO_E_TIMEOUT:
        s->fail_timeout++;
        break;
    case MP_PYRO_E_TLS:
        s->fail_tls++;
        break;
    case MP_PYRO_E_HTTP_RATE_LIMITED:
        s->fail_rate_limited++;
        break;
    case MP_PYRO_E_HTTP_SERVER:
        s->fail_server++;
        break;
    case MP_PYRO_E_HTTP_REJECTED:
        s->fail_rejected++;
        break;
    default:
        s->fail_other++;
        break;
    }
}
