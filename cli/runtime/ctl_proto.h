/* SPDX-License-Identifier: MIT */
/* The control protocol of `mimprof ctl` (the client, ../src/ctl.c) and
 * the runtime's control socket (rt_ctl.c): one request line, one
 * response. Not installed.
 *
 * Request: one line of at most MPT_CTL_MAX_LINE bytes, ending in '\n',
 * words separated by single spaces:
 *
 *   status
 *   start [interval=SIZE] [every=DURATION]
 *   stop
 *   report
 *   image
 *   set interval=SIZE
 *
 * SIZE and DURATION as on the command line (units.h): 64k, 1m; 10s,
 * 500ms, 0. Anything else is refused with a reason.
 *
 * Response: a first line "ok" or "ok BYTES" (then exactly BYTES bytes of
 * payload: the uncompressed pprof of `report`, the heap image of `image`)
 * or "error: REASON"; after "ok", `status` sends "key: value" lines.
 * The server closes the connection after one response. */
#ifndef MIMPROF_TOOL_CTL_PROTO_H
#define MIMPROF_TOOL_CTL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { MPT_CTL_MAX_LINE = 512 };

/* The abstract socket name of process `pid` (as that process sees its
 * own pid): "\0mimprof-ctl.<pid>". Returns the length of the address's
 * sun_path part (the leading NUL included). */
size_t mpt_ctl_name(long pid, char *path, size_t cap);

typedef enum {
    MPT_CTL_STATUS,
    MPT_CTL_START,
    MPT_CTL_STOP,
    MPT_CTL_REPORT,
    MPT_CTL_IMAGE,
    MPT_CTL_SET
} mpt_ctl_cmd;

typedef struct {
    mpt_ctl_cmd cmd;
    uint64_t interval; /* bytes; 0: not given */
    bool has_every;
    uint64_t every_ms;
} mpt_ctl_req;

/* Parses one request (`len` bytes, without the '\n'; not NUL-terminated).
 * 0, or -1 with a one-line reason in `why`. Never reads past `len`. */
int mpt_ctl_parse(const char *line, size_t len, mpt_ctl_req *req, char *why, size_t whylen);

/* The HTTP endpoint's address (rt_http.h): ADDR:PORT, [V6]:PORT, :PORT or
 * PORT (127.0.0.1), ADDR numeric or localhost; a wildcard address only
 * when `wildcard_ok`. Fills `ss` (a struct sockaddr_storage) and its
 * length. 0, or -1 with a reason. Shared with `mimprof run --http`, which
 * checks it before the program starts. */
int mpt_http_parse_addr(const char *spec, bool wildcard_ok, void *ss, unsigned *sslen, char *why,
                        size_t whylen);

#endif
