/* SPDX-License-Identifier: MIT */
/* The connections of the control's thread (server.c): a poll()
 * loop over listening sockets, each with its protocol, and a fixed table
 * of MPC_MAX_CONN non-blocking connections. Not installed.
 *
 * A connection reads into its buffer until its protocol has an answer
 * (on_input returns true), then writes the answer -- a head of at most
 * MPC_CONN_HEAD bytes and an optional body it owns -- as fast as the peer
 * reads, then drops what the peer still sends until it closes (so that
 * the close never resets the connection before the peer read the
 * answer), and is closed. Every connection is closed at the latest
 * MPC_CONN_DEADLINE_MS after it was accepted, answered or not, so a slow
 * or silent client holds a slot for a bounded time and never the thread.
 * When every slot is taken, a new connection gets the protocol's `busy`
 * answer (one non-blocking write) and is closed. */
#ifndef MIMPROF_PROFILING_CONTROL_CONN_H
#define MIMPROF_PROFILING_CONTROL_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

enum { MPC_MAX_CONN = 8 };

enum { MPC_CONN_IN = 16384, MPC_CONN_HEAD = 2048, MPC_CONN_DEADLINE_MS = 10000 };

typedef struct mpc_conn mpc_conn;

typedef struct {
    size_t max_in;                  /* request bytes kept, at most MPC_CONN_IN */
    const char *busy;               /* the answer when no slot is free */
    bool (*on_accept)(mpc_conn *c); /* false: refused (an answer may be set) */
    bool (*on_input)(mpc_conn *c);  /* true: the answer is set, or a timer */
    void (*on_timer)(mpc_conn *c);  /* c->timer_ms passed: sets the answer */
    void (*on_close)(mpc_conn *c);  /* releases c->user (may be NULL) */
} mpc_conn_proto;

struct mpc_conn {
    bool used; /* false: a free slot */
    int fd;
    mp_prof_owned_fd own; /* fd with its identity (mp_prof_fd_take, profiling.h) */
    const mpc_conn_proto *proto;
    int64_t deadline_ms; /* the protocol may move it (a delayed answer) */
    int64_t timer_ms;    /* nonzero: waiting for it, neither reading nor writing */
    void *user;          /* the protocol's, released by on_close */
    size_t in_len;
    char in[MPC_CONN_IN];
    bool answering;
    bool draining; /* answered: the peer's remaining input is dropped */
    char head[MPC_CONN_HEAD];
    size_t head_len;
    void *body;
    size_t body_len;
    void (*body_free)(void *body, size_t len);
    size_t sent; /* of head, then body */
};

/* Sets the head of the answer (printf; truncated at MPC_CONN_HEAD). */
void mpc_conn_head(mpc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the body of the answer, released by `release` when the connection
 * is closed (NULL: not owned). */
void mpc_conn_body(mpc_conn *c, void *body, size_t len, void (*release)(void *, size_t));

typedef struct {
    mp_prof_owned_fd *own; /* listening, non-blocking */
    const mpc_conn_proto *proto;
} mpc_loop_listener;

/* Serves until *stop is set (seen when `wake`, the read end of a pipe,
 * is written, and at least once a second), or until the program has
 * closed `wake` or a listener (mp_prof_fd_check, profiling.h: their numbers are then left
 * alone and the loop ends for good). Closes every connection that is
 * still its own before it returns. */
void mpc_loop_run(const mpc_loop_listener *ls, int n, mp_prof_owned_fd *wake, atomic_bool *stop);

/* The same loop without listeners or wake-up pipe: the connections come
 * from `h` (mp_prof_control_host). With none open, the thread waits in
 * h->take(-1); with some, it polls them at most 50 ms at a time and
 * takes more with h->take(0) in between. Each handed-over connection is
 * treated as an accepted one of `proto` (moved up, close-on-exec,
 * non-blocking, identified, on_accept). Ends when *stop is set (the
 * setter calls h->wake()), when take() returns -1, or on a poll error;
 * closes every connection that is still its own before it returns. */
void mpc_loop_run_host(const mp_prof_control_host *h, const mpc_conn_proto *proto,
                       atomic_bool *stop);

/* In a forked child: closes the inherited connections, releases their
 * bodies. */
void mpc_loop_after_fork(void);

#endif
