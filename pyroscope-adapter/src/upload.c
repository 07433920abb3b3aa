/* One profile, one request: the agent's unit of work, and the synchronous
 * mp_pyro_upload(). */
#define _GNU_SOURCE
#include "upload.h"

#include <stdlib.h>
#include <string.h>

void mp_pyro_send_profile(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_series *series,
                          const char *spy, const uint8_t *gz, size_t gz_len, int64_t from_ns,
                          int64_t until_ns, mp_pyro_rng *rng, const _Atomic int64_t *abort_at,
                          mp_pyro_http_result *res, size_t *body_len)
{
    mp_pyro_request req;
    mp_pyro_status st =
        cfg->protocol == MP_PYRO_PROTOCOL_PUSH
            ? mp_pyro_push_request(cfg, series, spy, gz, gz_len, rng, &req)
            : mp_pyro_ingest_request(cfg, series, spy, gz, gz_len, from_ns, until_ns, rng, &req);
    *body_len = 0;
    if (st != MP_PYRO_OK) {
        memset(res, 0, sizeof *res);
        res->status = st;
        mp_pyro_fmt(res->message, sizeof res->message, "building the request: %s",
                    mp_pyro_strerror(st));
        return;
    }
    *body_len = req.body.len;
    mp_pyro_http_send(h, cfg, &req, abort_at, res);
    mp_pyro_request_free(&req);
}

mp_pyro_status mp_pyro_upload(mp_pyro_config *cfg, const uint8_t *pprof, size_t len,
                              int64_t from_nanos, int64_t until_nanos, const char *spy_name,
                              char *err, size_t err_len)
{
    if (err && err_len)
        err[0] = '\0';
    if (!cfg || (!pprof && len))
        return MP_PYRO_E_INVALID_ARGUMENT;
    mp_pyro_status st = mp_pyro_config_validate(cfg);
    if (st != MP_PYRO_OK) {
        mp_pyro_fmt(err, err_len, "%s", cfg->error);
        return st;
    }
    uint8_t *gz;
    size_t gz_len;
    st = mp_pyro_gzip(pprof, len, &gz, &gz_len);
    if (st != MP_PYRO_OK)
        return st;
    mp_pyro_http *h;
    st = mp_pyro_http_new(&h);
    if (st != MP_PYRO_OK) {
        free(gz);
        return st;
    }
    mp_pyro_rng rng;
    mp_pyro_rng_seed(&rng);
    mp_pyro_http_result res;
    size_t body_len;
    mp_pyro_send_profile(h, cfg, &cfg->series, spy_name ? spy_name : "mimprof", gz, gz_len,
                         from_nanos, until_nanos, &rng, NULL, &res, &body_len);
    mp_pyro_http_free(h);
    free(gz);
    if (res.status != MP_PYRO_OK)
        mp_pyro_fmt(err, err_len, "%s", res.message);
    return res.status;
}
