/* SPDX-License-Identifier: MIT */
/* The connections of the runtime's control thread (rt_ctl.c): a poll()
 * loop over listening sockets, each with its protocol, and a fixed table
 * of MPT_CTL_MAX_CONN non-blocking connections. Not installed.
 *
 * A connection reads into its buffer until its protocol has an answer
 * (on_input returns true), then writes the answer -- a head of at most
 * MPT_CONN_HEAD bytes and an optional body it owns -- as fast as the peer
 * reads, then drops what the peer still sends until it closes (so that
 * the close never resets the connection before the peer read the
 * answer), and is closed. Every connection is closed at the latest
 * MPT_CONN_DEADLINE_MS after it was accepted, answered or not, so a slow
 * or silent client holds a slot for a bounded time and never the thread.
 * When every slot is taken, a new connection gets the protocol's `busy`
 * answer (one non-blocking write) and is closed. */
#ifndef MIMPROF_TOOL_RT_CONN_H
#define MIMPROF_TOOL_RT_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt_owned.h"

enum { MPT_CONN_IN = 16384, MPT_CONN_HEAD = 2048, MPT_CONN_DEADLINE_MS = 10000 };

typedef struct mpt_conn mpt_conn;

typedef struct {
    size_t max_in;                  /* request bytes kept, at most MPT_CONN_IN */
    const char *busy;               /* the answer when no slot is free */
    bool (*on_accept)(mpt_conn *c); /* false: refused (an answer may be set) */
    bool (*on_input)(mpt_conn *c);  /* true: the answer is set, or a timer */
    void (*on_timer)(mpt_conn *c);  /* c->timer_ms passed: sets the answer */
    void (*on_close)(mpt_conn *c);  /* releases c->user (may be NULL) */
} mpt_conn_proto;

struct mpt_conn {
    bool used; /* false: a free slot */
    int fd;
    mpt_owned own; /* fd with its identity (rt_owned.h) */
    const mpt_conn_proto *proto;
    int64_t deadline_ms; /* the protocol may move it (a delayed answer) */
    int64_t timer_ms;    /* nonzero: waiting for it, neither reading nor writing */
    void *user;          /* the protocol's, released by on_close */
    size_t in_len;
    char in[MPT_CONN_IN];
    bool answering;
    bool draining; /* answered: the peer's remaining input is dropped */
    char head[MPT_CONN_HEAD];
    size_t head_len;
    void *body;
    size_t body_len;
    void (*body_free)(void *body, size_t len);
    size_t sent; /* of head, then body */
};

/* Sets the head of the answer (printf; truncated at MPT_CONN_HEAD). */
void mpt_conn_head(mpt_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the body of the answer, released by `release` when the connection
 * is closed (NULL: not owned). */
void mpt_conn_body(mpt_conn *c, void *body, size_t len, void (*release)(void *, size_t));

typedef struct {
    mpt_owned *own; /* listening, non-blocking */
    const mpt_conn_proto *proto;
} mpt_loop_listener;

/* Serves until *stop is set (seen when `wake`, the read end of a pipe,
 * is written, and at least once a second), or until the program has
 * closed `wake` or a listener (rt_owned.h: their numbers are then left
 * alone and the loop ends for good). Closes every connection that is
 * still its own before it returns. */
void mpt_loop_run(const mpt_loop_listener *ls, int n, mpt_owned *wake, atomic_bool *stop);

/* In a forked child: closes the inherited connections, releases their
 * bodies. */
void mpt_loop_after_fork(void);

#endif
