/* SPDX-License-Identifier: MIT */
/* POST /push.v1.PusherService/Push (Connect unary, application/proto).
 * The series carries __delta__="false": the alloc_* values mimprof sends
 * are per interval already, so a v1 ingester must not delta them again
 * (v2 removes the label and stores values as sent). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "push.pb-c.h"
#include "request.h"

typedef Mimprof__Pyroscope__Push__LabelPair LabelPair;

mp_pyro_status mp_pyro_push_request(const mp_pyro_config *cfg, const mp_pyro_series *series,
                                    const char *spy, const uint8_t *gz, size_t gz_len,
                                    mp_pyro_rng *rng, mp_pyro_request *req)
{
    memset(req, 0, sizeof *req);
    enum { FIXED = 4 };
    LabelPair pairs[FIXED + MP_PYRO_MAX_TAGS];
    LabelPair *ptrs[FIXED + MP_PYRO_MAX_TAGS];
    const char *fixed[FIXED][2] = {{"__name__", "memory"},
                                   {"__delta__", "false"},
                                   {"service_name", series->app},
                                   {"pyroscope_spy", spy}};
    size_t n = 0;
    for (size_t i = 0; i < FIXED; i++, n++) {
        mimprof__pyroscope__push__label_pair__init(&pairs[n]);
        pairs[n].name = (char *)(uintptr_t)fixed[i][0];
        pairs[n].value = (char *)(uintptr_t)fixed[i][1];
        ptrs[n] = &pairs[n];
    }
    for (size_t i = 0; i < series->ntags; i++, n++) {
        mimprof__pyroscope__push__label_pair__init(&pairs[n]);
        pairs[n].name = series->tags[i].name;
        pairs[n].value = series->tags[i].value;
        ptrs[n] = &pairs[n];
    }
    char id[37];
    mp_pyro_uuid4(rng, id);
    Mimprof__Pyroscope__Push__RawSample sample = MIMPROF__PYROSCOPE__PUSH__RAW_SAMPLE__INIT;
    sample.raw_profile.data = (uint8_t *)(uintptr_t)gz;
    sample.raw_profile.len = gz_len;
    sample.id = id;
    Mimprof__Pyroscope__Push__RawSample *samples[1] = {&sample};
    Mimprof__Pyroscope__Push__RawProfileSeries s =
        MIMPROF__PYROSCOPE__PUSH__RAW_PROFILE_SERIES__INIT;
    s.n_labels = n;
    s.labels = ptrs;
    s.n_samples = 1;
    s.samples = samples;
    Mimprof__Pyroscope__Push__RawProfileSeries *all[1] = {&s};
    Mimprof__Pyroscope__Push__PushRequest pr = MIMPROF__PYROSCOPE__PUSH__PUSH_REQUEST__INIT;
    pr.n_series = 1;
    pr.series = all;

    size_t len = mimprof__pyroscope__push__push_request__get_packed_size(&pr);
    req->body.data = malloc(len ? len : 1);
    if (!req->body.data)
        return MP_PYRO_E_NOMEM;
    req->body.cap = len ? len : 1;
    req->body.len = mimprof__pyroscope__push__push_request__pack(&pr, req->body.data);

    mp_pyro_buf url = {0};
    mp_pyro_buf_puts(&url, cfg->server);
    mp_pyro_buf_puts(&url, "/push.v1.PusherService/Push");
    req->url = mp_pyro_buf_cstr(&url);
    req->content_type = strdup("application/proto");
    req->connect = true;
    if (!req->url || !req->content_type) {
        if (!req->url)
            mp_pyro_buf_free(&url);
        mp_pyro_request_free(req);
        return MP_PYRO_E_NOMEM;
    }
    return MP_PYRO_OK;
}
