/* SPDX-License-Identifier: MIT */
/* The control protocol of `mimprof ctl` (the client, cli/src/ctl.c) and
 * the control socket (ctl.c): one request line, one response; and the
 * HTTP endpoint's address. Not installed.
 *
 * Request: one line of at most MPC_CTL_MAX_LINE bytes, ending in '\n',
 * words separated by single spaces:
 *
 *   status
 *   start [interval=SIZE] [every=DURATION]
 *   stop
 *   report
 *   image
 *   set interval=SIZE
 *
 * SIZE: digits with k, m or g (KiB, MiB, GiB; an optional b or ib
 * after it), b or nothing: 64k, 1m. DURATION: digits with an optional
 * fraction and ms, s (or nothing), m or min, h: 10s, 500ms, 1.5m, 0. Anything else is refused with a reason.
 *
 * Response: a first line "ok" or "ok BYTES" (then exactly BYTES bytes of
 * payload: the uncompressed pprof of `report`, the heap image of `image`)
 * or "error: REASON"; after "ok", `status` sends "key: value" lines.
 * The server closes the connection after one response. */
#ifndef MIMPROF_PROFILING_CONTROL_PROTO_H
#define MIMPROF_PROFILING_CONTROL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling_control.h>

enum { MPC_CTL_MAX_LINE = MP_PROF_CONTROL_MAX_REQUEST };

/* The abstract socket name of process `pid` (as that process sees its
 * own pid): "\0mimprof-ctl.<pid>". Returns the length of the address's
 * sun_path part (the leading NUL included). */
size_t mpc_ctl_name(long pid, char *path, size_t cap);

typedef enum {
    MPC_CTL_STATUS,
    MPC_CTL_START,
    MPC_CTL_STOP,
    MPC_CTL_REPORT,
    MPC_CTL_IMAGE,
    MPC_CTL_SET
} mpc_ctl_cmd;

typedef struct {
    mpc_ctl_cmd cmd;
    uint64_t interval; /* bytes; 0: not given */
    bool has_every;
    uint64_t every_ms;
} mpc_ctl_req;

/* Parses one request (`len` bytes, without the '\n'; not NUL-terminated).
 * 0, or -1 with a one-line reason in `why`. Never reads past `len`. */
int mpc_ctl_parse(const char *line, size_t len, mpc_ctl_req *req, char *why, size_t whylen);

/* The HTTP endpoint's address: ADDR:PORT, [V6]:PORT, :PORT or PORT
 * (127.0.0.1), ADDR numeric or localhost; a wildcard address only when
 * `wildcard_ok`. Fills `ss` (a struct sockaddr_storage) and its length.
 * 0, or -1 with a reason (mp_prof_control_check_http). */
int mpc_http_parse_addr(const char *spec, bool wildcard_ok, void *ss, unsigned *sslen, char *why,
                        size_t whylen);

/* A SIZE and a DURATION (in milliseconds) of the protocol, whole
 * NUL-terminated words. */
bool mpc_parse_size(const char *s, uint64_t *out);
bool mpc_parse_duration_ms(const char *s, uint64_t *out);

#endif
