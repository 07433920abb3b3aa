/* SPDX-License-Identifier: MIT */
/* Control of a running process: the runtime's control socket (rt_ctl.c)
 * and the session operations it calls, which preload_runtime.c
 * implements. Not installed.
 *
 * The socket. In runtime mode (not the bare preload; MIMPROF_CTL=0 turns
 * it off) each process listens on the abstract Unix socket
 * "\0mimprof-ctl.<pid>" (ctl_proto.h: the protocol), served by one thread
 * of the runtime, born with every signal blocked, which runs no code of
 * the program. Why the abstract namespace rather than a file in
 * $XDG_RUNTIME_DIR: no file is ever created in the program's file system
 * (none to remove at exit, none left behind by a SIGKILL or a crash, no
 * writable directory needed by a service that has none, e.g. systemd's
 * ProtectSystem=strict without a user session), and the kernel frees the
 * name with the last descriptor. The cost: an abstract name has no file
 * permissions and belongs to a network namespace: any process of that
 * namespace may connect (so every connection is checked, below), and
 * another network namespace (a container with its own) does not see it
 * (`mimprof ctl` says so; `nsenter -t PID -n mimprof ctl PID ...` reaches
 * it). A mount namespace does not matter.
 *
 * Who may connect: SO_PEERCRED's uid must be this process's effective
 * uid, or 0. Another user's connection gets one error line and is
 * closed; the first one of each process is logged on stderr.
 *
 * Bounds: at most MPT_CTL_MAX_CONN connections at once (more are told
 * "error: busy" and closed), a request line of MPT_CTL_MAX_LINE bytes, 10 s
 * per connection from accept to the last byte of the response; every
 * socket is non-blocking, so no client can stall the thread.
 *
 * Descriptors: the listening socket, the thread's wake-up pipe and
 * every accepted connection are close-on-exec and moved to the top of the
 * descriptor range (mpt_rt_fd_high), out of the program's way, and
 * identity-checked before each use (rt_owned.h): a program that closes
 * them all ends the thread, never shares a number with it. An
 * accepted connection holds the lowest free number for the instant
 * between accept4() and that move: a program thread opening a file at
 * that very moment gets the next number instead.
 *
 * fork: the child closes its inherited copies; a child the runtime
 * follows (MIMPROF_FOLLOW_FORK) opens its own socket, under its own pid,
 * dormant when its parent was (rt_ctl: mpt_ctl_after_fork); other children
 * have none. exec: the descriptors are closed; a program that profiles
 * itself after the exec listens again (same pid, same name). */
#ifndef MIMPROF_TOOL_RT_CTL_H
#define MIMPROF_TOOL_RT_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { MPT_CTL_MAX_CONN = 8 };

/* ---- the socket (rt_ctl.c) -------------------------------------------- */

/* Binds this process's socket (when `ctl`) and the HTTP endpoint (when
 * `http` is not NULL: rt_http.h) and starts their thread. 0, or -1
 * (neither: a line on stderr said why; the process runs on without). */
int mpt_ctl_start(bool quiet, bool ctl, const char *http, bool http_wildcard);

/* The HTTP endpoint is served (reports then feed rt_cumul.h). */
bool mpt_ctl_http_on(void);

/* In a forked child (single-threaded): closes the parent's descriptors,
 * and opens its own socket when `serve`. */
void mpt_ctl_after_fork(bool serve);

/* Stops the thread and closes the socket (at exit). Idempotent. */
void mpt_ctl_stop(void);

/* ---- the session operations (preload_runtime.c) ----------------------- */

typedef struct {
    bool running;
    uint64_t interval; /* of the running session, else of the next start */
    uint64_t next_interval;
    uint64_t every_ms;      /* 0: reports only when asked and at exit */
    unsigned reports;       /* written or handed over by this process */
    int64_t last_report_ns; /* wall clock; 0: none yet */
    bool uploading;
    const char *service; /* service_name when uploading */
    uint64_t uploaded, upload_lost;
    const char *output; /* where reports go, "" when nowhere */
} mpt_rt_state;

/* The state now. */
void mpt_rt_get_state(mpt_rt_state *st);

/* Starts a session (interval 0: the configured one; every_ms < 0: the
 * configured period). 0, or -1 with a reason. */
int mpt_rt_ctl_start(uint64_t interval, int64_t every_ms, char *why, size_t whylen);

/* Writes the session's last report (as at exit) and stops it: dormant
 * again. 0, or -1 with a reason. */
int mpt_rt_ctl_stop(char *why, size_t whylen);

/* A report now, as uncompressed pprof (free with mp_prof_buffer_free).
 * It is one of the process's series like any other: written to the
 * output (when reports are written) and uploaded (when uploading), so
 * that no window of allocations is lost anywhere, and merged into the
 * HTTP endpoint's cumulative profile. `then` (if not NULL) runs with the
 * runtime's report lock held, right after it was taken (the HTTP
 * endpoint encodes rt_cumul.h there). 0, or -1 with a reason. */
int mpt_rt_ctl_report(uint8_t **buf, size_t *len, void (*then)(void *), void *ctx, char *why,
                      size_t whylen);

/* A heap image now, written to `path`. 0, or -1 with a reason. */
int mpt_rt_ctl_image(const char *path, char *why, size_t whylen);

/* The interval of the next session. */
void mpt_rt_ctl_set_interval(uint64_t interval);

#endif
