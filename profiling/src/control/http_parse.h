/* SPDX-License-Identifier: MIT */
/* Reading an HTTP/1.x request of the /debug/pprof endpoint (http.c): the
 * request line, the end of the headers, Content-Length, the body, and the
 * `seconds` / `debug` query. Pure functions over the bytes received, no
 * allocation: what any local process may send is parsed here, and
 * fuzzed (profiling/fuzz/fuzz_http_request.c). Not installed. */
#ifndef MIMPROF_CONTROL_HTTP_PARSE_H
#define MIMPROF_CONTROL_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

enum {
    MPC_HTTP_LINE_MAX = 2048,  /* request line, bytes (414 beyond) */
    MPC_HTTP_MAX_SECONDS = 60, /* ?seconds=N */
};

typedef enum mpc_http_method {
    MPC_HTTP_GET,
    MPC_HTTP_HEAD,
    MPC_HTTP_POST,
    MPC_HTTP_OTHER
} mpc_http_method;

typedef struct mpc_http_req {
    int status;      /* 0: a request to serve; else the HTTP status to refuse it with */
    const char *why; /* with a refusal: its one-line reason (static) */
    mpc_http_method method;
    char target[MPC_HTTP_LINE_MAX]; /* the path, NUL-terminated, starts with '/' */
    const char *query;              /* into target, after the '?' (removed); NULL when none */
    bool symbol;                    /* the target is /debug/pprof/symbol */
    size_t body_off; /* the body: bytes [body_off, body_off + body_len) of the input */
    size_t body_len;
} mpc_http_req;

/* Reads the request in the `len` bytes at `in` (not NUL-terminated), of
 * which at most `cap` are ever kept. false: incomplete, wait for more
 * bytes (only while len < cap). true: *r is filled, with r->status 0 (a
 * request: method, target, query and, for a POST to the symbol target,
 * its body) or a refusal (400 malformed, 405 method, 413 body too large,
 * 414 request line too long, 431 headers too large) and r->why. Never
 * reads past `in + len`. */
bool mpc_http_parse(const char *in, size_t len, size_t cap, mpc_http_req *r);

/* The `seconds` of a query (NUL-terminated, may be NULL): 1..
 * MPC_HTTP_MAX_SECONDS, 0 when absent, -1 when malformed, -2 for a
 * `debug` other than 0 (Go's text formats are not served). */
long mpc_http_query_seconds(const char *query);

#endif
