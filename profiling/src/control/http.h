/* SPDX-License-Identifier: MIT */
/* The control's HTTP endpoint: Go's /debug/pprof/heap for C and C++
 * programs (mp_prof_control_options::http; `mimprof run --http`,
 * MIMPROF_HTTP=ADDR:PORT). Not installed.
 *
 * Served by the control thread (control.h: one thread, at most
 * MPC_MAX_CONN connections for both, 10 s each, non-blocking), on
 * the address given only: a bare port or ":PORT" is 127.0.0.1; a wildcard
 * address (0.0.0.0, [::]) is refused unless the options' http_wildcard
 * (`--http-wildcard`) says so. HTTP/1.1, one GET (or HEAD) per
 * connection, requests of at most 16 KiB (else 431), answers closed
 * after (`Connection: close`).
 *
 *   /debug/pprof/          an HTML index of the two below
 *   /debug/pprof/heap      gzip-compressed pprof, Go's semantics:
 *                          inuse_* now, alloc_* cumulative since the
 *                          session started, no __delta__ label
 *                          (cumul.h); default sample type inuse_space
 *   /debug/pprof/allocs    the same profile, default type alloc_space
 *   /debug/pprof/symbol    names of addresses (GET, POST; symbol.c), which
 *                          go tool pprof asks for when a mapping is not
 *                          fully named
 *   ?seconds=N             (1..60) the difference between now and N
 *                          seconds later, as Go's handler computes it
 *
 * Headers as Go's net/http/pprof sends them: Content-Type
 * application/octet-stream, Content-Disposition attachment;
 * filename="heap" (or "allocs", "heap-delta"), X-Content-Type-Options
 * nosniff; errors are text/plain with one line. A dormant process
 * answers 503 with the reason and how to start it: a scrape never starts
 * a session (a scraper's retry loop would otherwise switch profiling on
 * for good) unless the options' http_starts asks for it. Each request
 * takes a report of the process's series (the report operation,
 * control.h): under `mimprof run`, written and uploaded like any other.
 *
 * Forked children do not serve it (the port is the parent's). */
#ifndef MIMPROF_PROFILING_CONTROL_HTTP_H
#define MIMPROF_PROFILING_CONTROL_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"

/* Binds and listens on `spec` (non-blocking, close-on-exec, high). The
 * descriptor, or -1 with a reason. */
int mpc_http_listen(const char *spec, bool wildcard_ok, char *why, size_t whylen);

/* Answers of the handler, for symbol.c: an error as one line of
 * text/plain; the head of a 200 answer of `len` bytes. */
void mpc_http_text(mpc_conn *c, int code, const char *reason, const char *msg);
void mpc_http_ok(mpc_conn *c, const char *content_type, size_t len);

/* /debug/pprof/symbol (symbol.c): `body` the addresses of a POST (empty
 * for GET). */
void mpc_http_symbol(mpc_conn *c, bool head_only, const char *body, size_t len);

/* The protocol of the listener, for conn.h's loop. */
extern const mpc_conn_proto mpc_http_proto;

#endif
