/* SPDX-License-Identifier: MIT */
/* What a server's error reply says, made safe to print. Not installed. */
#ifndef MP_PYRO_REPLY_H
#define MP_PYRO_REPLY_H

#include <stddef.h>

/* The "message" string of a JSON error body {"code":..,"message":..}
 * (Connect and Pyroscope's HTTP API), else the body's first line (at most
 * 200 bytes: /ingest answers in plain text). `body` is NUL-terminated and
 * comes from the network: every byte outside printable ASCII becomes '?'
 * in `out`, so that a server's bytes never drive a terminal or a log
 * reader; the escapes \" and \\ are undone, others kept as written.
 * `out` always ends in a NUL and holds at most len - 1 bytes. */
void mp_pyro_server_message(const char *body, char *out, size_t len);

#endif
