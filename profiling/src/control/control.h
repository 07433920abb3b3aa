/* SPDX-License-Identifier: MIT */
/* The process's control (<mimprof/profiling_control.h>): the module map
 * and what the pieces share. Not installed.
 *
 *   server.c   the control object: options, sockets, the thread, fork,
 *              the public functions
 *   ctl.c      the `mimprof ctl` protocol on a connection (answers, the
 *              SO_PEERCRED check)
 *   http.c     the /debug/pprof protocol on a connection (Go's handler)
 *   cumul.c    the cumulative profile behind /debug/pprof (Go's
 *              semantics over windowed reports)
 *   session.c  the session operations without hooks (a session of the
 *              control's own over mp_profiler_*)
 *   conn.c     the poll() loops (listeners, or a host) and the bounded
 *              connection table
 *   proto.c    the request parser (fuzzed: ../../fuzz/fuzz_ctl_request.c),
 *              the socket name, the HTTP address rules
 *   arena.c    mmap()ed memory for the control's own work
 *   ../owned.c identity-checked descriptors near the top of the range
 *
 * Threads: the server thread runs every answer, so the session
 * operations (the hooks) run one at a time on it. The host's other
 * threads reach the control only through mp_prof_control_feed() and
 * mp_prof_control_session_started(), serialised by the host's report
 * lock (without hooks, by session.c's lock), which is also the lock of
 * cumul.c's state. Opening and closing are the program's, one at a time
 * (g.lock in server.c). */
#ifndef MIMPROF_PROFILING_CONTROL_INTERNAL_H
#define MIMPROF_PROFILING_CONTROL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling_control.h>

#include "conn.h"

/* The session operations in force: the host's hooks, or session.c's. */
const mp_prof_control_hooks *mpc_ops(void);

/* The options the control was opened with. */
const mp_prof_control_options *mpc_options(void);

/* Where the HTTP endpoint listens ("HOST:PORT"), or NULL. */
const char *mpc_http_name(void);

/* A message: the host's log hook, else stderr (one write) unless quiet
 * and not `always`. */
void mpc_say(bool always, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* In a forked child: its first refused user is logged again (ctl.c). */
void mpc_ctl_after_fork(void);

/* The protocol of the control socket's listener (ctl.c; http.h has
 * the HTTP one's). */
extern const mpc_conn_proto mpc_ctl_proto;

/* A session started: the HTTP endpoint's cumulative profile begins
 * again (server.c; a no-op without the endpoint). */
void mpc_http_session_started(void);

/* One report of the session, for the HTTP endpoint (a no-op without it). */
mp_prof_status mpc_http_feed(const uint8_t *pprof, size_t len);

/* session.c: the operations without hooks. */
void mpc_session_init(const mp_prof_config *cfg);
extern const mp_prof_control_hooks mpc_session_hooks;
/* Stops the control's session, if one runs (no report). */
void mpc_session_end(void);
/* In a forked child: the parent's session is not the child's. */
void mpc_session_after_fork(void);

#endif
