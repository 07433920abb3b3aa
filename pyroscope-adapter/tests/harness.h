/* SPDX-License-Identifier: MIT */
/* Test harness of mimprof-pyroscope: the Python stand-in (or a real
 * server from MIMPROF_PYROSCOPE_URL), a raw capture server, the
 * workspace's protobuf/pprof reader, a protobuf writer and a fixed-bytes
 * backend. Everything here is written apart from the library's encoders. */
#ifndef MP_PYRO_TEST_HARNESS_H
#define MP_PYRO_TEST_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <mimprof/pyroscope.h>

/* The workspace's protobuf field reader and pprof decoder (tests/support). */
#include "pprof_decode.h"

/* --- the stand-in server (tests/pyroscope-server/server.py) -------------- */

typedef struct ts_server {
    pid_t pid;
    int port, control;
    char url[512];
    bool external; /* a real server from MIMPROF_PYROSCOPE_URL */
} ts_server;

/* Starts the stand-in with extra arguments (NULL-terminated list, may be
 * NULL). Returns false when python or the script is missing. */
bool ts_start(ts_server *s, const char *const *args);
/* The real server when MIMPROF_PYROSCOPE_URL is set, else ts_start(). */
bool ts_start_any(ts_server *s, const char *const *args);
void ts_stop(ts_server *s);
bool ts_have_standin(void);
/* Control port: POST a JSON body to `path` ("/fault", "/config", "/reset"). */
bool ts_post(ts_server *s, const char *path, const char *json);
/* Control port GET; malloc()ed NUL-terminated text or NULL. */
char *ts_get(ts_server *s, const char *path);
/* A counter of GET /summary (0 when absent). */
long ts_summary(ts_server *s, const char *key);
/* Number of stored records of `type_id` (GET /profiles.tsv). */
long ts_records(ts_server *s, const char *type_id);

/* Environment knobs. */
const char *ts_external_url(void); /* MIMPROF_PYROSCOPE_URL or NULL */
double ts_env_double(const char *name, double dflt);

/* --- small buffers and HTTP ------------------------------------------------ */

typedef struct tbuf {
    uint8_t *p;
    size_t len, cap;
} tbuf;
void tbuf_put(tbuf *b, const void *p, size_t n);
void tbuf_free(tbuf *b);

/* POST with libcurl; returns the HTTP status or -1. `headers` NULL-terminated. */
long http_post(const char *url, const char *const *headers, const void *body, size_t len,
               tbuf *resp);

bool t_gunzip(const uint8_t *in, size_t n, tbuf *out);

/* --- protobuf wire, written (independent of protobuf-c) --------------------- */

void pbw_varint(tbuf *b, uint32_t field, uint64_t v);
void pbw_bytes(tbuf *b, uint32_t field, const void *p, size_t n);
void pbw_str(tbuf *b, uint32_t field, const char *s);
void pbw_double(tbuf *b, uint32_t field, double d);

/* --- the fixed test profile and backend ------------------------------------- */

/* Two stacks main>work>alloc_small and main>work>alloc_big; interval
 * samples (alloc_*) carry the label __delta__="false" when delta_label. */
typedef struct tp_heap_values {
    int64_t alloc_objects[2], alloc_space[2], inuse_objects[2], inuse_space[2];
} tp_heap_values;
uint8_t *tp_build_heap(const tp_heap_values *v, int64_t time_ns, int64_t duration_ns,
                       bool delta_label, size_t *len);

/* 2^bits stacks, as a program recursing by the bits of a counter makes
 * them (main > bit0_b > ... > bit{bits-1}_b > alloc_block), each with an
 * interval sample {1, bytes} labelled __delta__="false" and a live sample
 * {1, bytes}: what mimprof reports for 2^bits live blocks of `bytes`. */
uint8_t *tp_build_wide(int bits, int64_t bytes, int64_t time_ns, size_t *len);
/* The first `count` (<= 2^bits) of those stacks. */
uint8_t *tp_build_wide_n(int bits, uint64_t count, int64_t bytes, int64_t time_ns, size_t *len);

/* Report k (0-based) of the fixed backend: alloc_space = 1000*(k+1) and
 * 100000, alloc_objects = 10*(k+1) and 1, inuse_space 500 and 200000,
 * inuse_objects 5 and 2. */
void fixed_values(int k, tp_heap_values *v);

typedef struct fixed_backend {
    pthread_mutex_t mu;
    int reports;
    mp_pyro_window windows[4096];
    int nwindows;
    int fail_at; /* report index that fails, -1 none */
    bool empty;  /* return nothing to upload */
    bool started, stopped;
    int64_t sum_alloc_space, sum_inuse_space;
} fixed_backend;

/* A backend over fixed_values(); `*state` stays valid until mp_pyro_backend_free. */
mp_pyro_backend *fixed_backend_new(fixed_backend **state);
void fixed_snapshot(fixed_backend *f, int *reports, int64_t *alloc_space, int64_t *inuse_space);

/* --- raw capture server ------------------------------------------------------ */

typedef struct cap_request {
    char *head; /* request line + headers, NUL-terminated */
    uint8_t *body;
    size_t body_len;
} cap_request;

typedef struct cap_server {
    int fd, port;
    pthread_t thread;
    pthread_mutex_t mu;
    cap_request reqs[64];
    int nreqs;
    int status;
    char extra[512]; /* extra response header lines, each ending \r\n */
    char body[1024];
    atomic_bool stop;
    char url[64];
} cap_server;

bool cap_start(cap_server *c, int status, const char *extra_headers, const char *body);
void cap_stop(cap_server *c);
int cap_count(cap_server *c);
/* Value of header `name` in request i (malloc()ed) or NULL. */
char *cap_header(cap_server *c, int i, const char *name);
/* The request line of request i (malloc()ed). */
char *cap_request_line(cap_server *c, int i);

/* --- queries (Connect, protobuf) -------------------------------------------- */

/* Sum of every point of SelectSeries; -1 on error. */
double q_series_sum(const char *base, const char *tenant, const char *type_id, const char *selector,
                    int64_t start_ms, int64_t end_ms);
/* SelectMergeProfile into `out`; false on error. */
bool q_merge(const char *base, const char *tenant, const char *type_id, const char *selector,
             int64_t start_ms, int64_t end_ms, tp_profile *out);
/* True when LabelValues(name) holds `value`. */
bool q_label_has(const char *base, const char *tenant, const char *name, const char *value,
                 int64_t start_ms, int64_t end_ms);
/* True when ProfileTypes holds `id`. */
bool q_has_type(const char *base, const char *tenant, const char *id, int64_t start_ms,
                int64_t end_ms);

/* Servers store eventually (v2 lists a new service's labels minutes after
 * its data is queryable): these ask again every 500 ms until the answer
 * is the one wanted or `deadline_ms` passed, and return the last answer. */
bool q_label_has_wait(const char *base, const char *tenant, const char *name, const char *value,
                      int64_t start_ms, int64_t end_ms, int deadline_ms);
bool q_has_type_wait(const char *base, const char *tenant, const char *id, int64_t start_ms,
                     int64_t end_ms, int deadline_ms);
/* The total of sample type `sample_type` (e.g. "alloc_space") of
 * SelectMergeProfile over [start_ms, end_ms] (both included, as the API
 * takes them), polled until it equals `want` or the deadline; -1 when the
 * query fails. */
int64_t q_merge_total_wait(const char *base, const char *tenant, const char *type_id,
                           const char *selector, int64_t start_ms, int64_t end_ms, int64_t want,
                           int deadline_ms);

int64_t now_ms(void);
void sleep_ms(int ms);

#endif
