/* SPDX-License-Identifier: MIT */
/* The control thread's connections (conn.h). */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>

/* With a host: how long the thread polls its connections before it asks
 * the host for more (conn.h). */
enum { HOST_POLL_MS = 50 };

/* Only the control thread touches the table (and a fork child, alone). */
static mpc_conn g_conns[MPC_MAX_CONN];

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void mpc_conn_head(mpc_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->head, sizeof c->head, fmt, ap);
    va_end(ap);
    c->head_len = n < 0 ? 0 : (size_t)n < sizeof c->head ? (size_t)n : sizeof c->head - 1;
    c->answering = true;
}

void mpc_conn_body(mpc_conn *c, void *body, size_t len, void (*release)(void *, size_t))
{
    c->body = body;
    c->body_len = len;
    c->body_free = release;
}

static void conn_close(mpc_conn *c)
{
    if (!c->used)
        return;
    mp_prof_fd_close(&c->own);
    if (c->proto->on_close != NULL)
        c->proto->on_close(c);
    if (c->body != NULL && c->body_free != NULL)
        c->body_free(c->body, c->body_len);
    c->used = false;
    c->fd = -1;
    c->body = NULL;
    c->body_len = 0;
    c->body_free = NULL;
}

/* Reads and drops what the peer still sends; closes at its end. */
static void conn_drain(mpc_conn *c)
{
    char sink[4096];
    for (;;) {
        ssize_t r = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r > 0 || (r < 0 && errno == EINTR))
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn_close(c);
        return;
    }
}

/* Writes what the peer takes now; then drains. */
static void conn_write(mpc_conn *c)
{
    for (;;) {
        const char *p;
        size_t left;
        if (c->sent < c->head_len) {
            p = c->head + c->sent;
            left = c->head_len - c->sent;
        } else if (c->sent < c->head_len + c->body_len) {
            p = (const char *)c->body + (c->sent - c->head_len);
            left = c->head_len + c->body_len - c->sent;
        } else {
            /* Sent. Closing now, with request bytes still unread, would
             * reset the connection and the peer could lose the answer:
             * the rest of its input is read and dropped until it closes
             * (a second at most). */
            shutdown(c->fd, SHUT_WR);
            c->draining = true;
            int64_t soon = mono_ms() + 1000;
            if (soon < c->deadline_ms)
                c->deadline_ms = soon;
            conn_drain(c);
            return;
        }
        ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_close(c);
            return;
        }
        c->sent += (size_t)w;
    }
}

static void conn_read(mpc_conn *c)
{
    size_t max = c->proto->max_in < sizeof c->in ? c->proto->max_in : sizeof c->in;
    while (!c->answering && c->used) {
        if (c->in_len >= max) {
            conn_close(c); /* the protocol kept reading past its own bound */
            return;
        }
        ssize_t r = recv(c->fd, c->in + c->in_len, max - c->in_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            conn_close(c); /* the peer left without a request */
            return;
        }
        c->in_len += (size_t)r;
        if (c->proto->on_input(c) && c->timer_ms == 0)
            conn_write(c);
    }
}

/* Takes a connection just accepted or handed over (any number, any
 * flags): moved up, close-on-exec, non-blocking, identified, into a free
 * slot -- or answered `busy` and closed when every slot is taken. */
static void conn_adopt(int fd, const mpc_conn_proto *proto)
{
    mp_prof_owned_fd own;
    fd = mp_prof_fd_high(fd);
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fl < 0 ||
            fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            close(fd);
            return;
        }
    }
    if (!mp_prof_fd_take(&own, fd))
        return;
    fd = own.fd;
    mpc_conn *c = NULL;
    for (int i = 0; i < MPC_MAX_CONN && c == NULL; i++)
        if (!g_conns[i].used)
            c = &g_conns[i];
    if (c == NULL) {
        ssize_t w = send(fd, proto->busy, strlen(proto->busy), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
        close(fd);
        return;
    }
    memset(c, 0, offsetof(mpc_conn, in));
    c->used = true;
    c->fd = fd;
    c->own = own;
    c->proto = proto;
    c->deadline_ms = mono_ms() + MPC_CONN_DEADLINE_MS;
    c->answering = false;
    c->draining = false;
    c->head_len = c->sent = 0;
    c->body = NULL;
    c->body_len = 0; /* past `in`: not cleared above */
    c->body_free = NULL;
    c->timer_ms = 0;
    c->user = NULL;
    if (c->proto->on_accept != NULL && !c->proto->on_accept(c)) {
        if (c->answering)
            conn_write(c); /* a refusal: sent as any answer */
        else
            conn_close(c);
    }
}

static void accept_all(const mpc_loop_listener *l)
{
    for (;;) {
        int fd = accept4(l->own->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or an error the next poll retries */
        conn_adopt(fd, l->proto);
    }
}

/* Runs the connections' due timers and deadlines, then lists the
 * connections to poll: their pollfds from pf[0], their slots in slot[].
 * Returns how many; *next is the earliest timer or deadline (-1: none). */
static int conns_due(struct pollfd *pf, int *slot, int64_t now, int64_t *next)
{
    int nc = 0;
    *next = -1;
    for (int i = 0; i < MPC_MAX_CONN; i++) {
        mpc_conn *c = &g_conns[i];
        if (!c->used)
            continue;
        if (c->timer_ms != 0 && now >= c->timer_ms) {
            c->timer_ms = 0;
            c->proto->on_timer(c);
            conn_write(c);
            if (!c->used)
                continue;
        }
        if (now >= c->deadline_ms) {
            conn_close(c); /* too slow: answered or not, its time is up */
            continue;
        }
        int64_t due = c->timer_ms != 0 ? c->timer_ms : c->deadline_ms;
        if (*next < 0 || due < *next)
            *next = due;
        if (c->timer_ms != 0)
            continue; /* neither read nor written until its timer */
        slot[nc] = i;
        pf[nc++] =
            (struct pollfd){.fd = c->fd, .events = c->answering && !c->draining ? POLLOUT : POLLIN};
    }
    return nc;
}

/* Acts on the events poll() reported for the connections conns_due()
 * listed. */
static void conns_serve(const struct pollfd *pf, const int *slot, int nc)
{
    for (int i = 0; i < nc; i++) {
        mpc_conn *c = &g_conns[slot[i]];
        short ev = pf[i].revents;
        if (ev == 0 || !c->used)
            continue;
        if ((ev & POLLNVAL) || !mp_prof_fd_check(&c->own)) {
            conn_close(c); /* closed by the program: forgotten, not closed */
            continue;
        }
        if (c->draining)
            conn_drain(c);
        else if (c->answering)
            conn_write(c);
        else if (ev & (POLLIN | POLLHUP | POLLERR))
            conn_read(c);
    }
}

static bool conns_any(void)
{
    for (int i = 0; i < MPC_MAX_CONN; i++)
        if (g_conns[i].used)
            return true;
    return false;
}

/* Whether the loop's own descriptors are still its own after a poll:
 * none reported invalid, each still naming the file it was opened on.
 * Checked before any event is acted on, so a number the program took
 * back is never read, accepted on or written. */
static bool still_ours(const struct pollfd *pf, mp_prof_owned_fd *wake, const mpc_loop_listener *ls,
                       int n)
{
    if ((pf[0].revents & POLLNVAL) || !mp_prof_fd_check(wake))
        return false;
    for (int i = 0; i < n; i++)
        if ((pf[1 + i].revents & POLLNVAL) || !mp_prof_fd_check(ls[i].own))
            return false;
    return true;
}

void mpc_loop_run(const mpc_loop_listener *ls, int n, mp_prof_owned_fd *wake, atomic_bool *stop)
{
    enum { MAXL = 4 };
    struct pollfd pf[1 + MAXL + MPC_MAX_CONN];
    int slot[MPC_MAX_CONN];
    if (n > MAXL)
        n = MAXL;
    while (!atomic_load(stop)) {
        int np = 0;
        pf[np++] = (struct pollfd){.fd = wake->fd, .events = POLLIN};
        for (int i = 0; i < n; i++)
            pf[np++] = (struct pollfd){.fd = ls[i].own->fd, .events = POLLIN};
        int64_t now = mono_ms(), next;
        int nc = conns_due(pf + np, slot, now, &next);
        np += nc;
        /* A second at most: a stop is seen even when the program closed
         * the pipe's write end (the waker then cannot write). */
        int timeout = next < 0 || next - now >= 1000 ? 1000 : (int)(next - now) + 1;
        int r = poll(pf, (nfds_t)np, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (!still_ours(pf, wake, ls, n))
            break; /* the program closed them: nothing here is ours to serve */
        if (pf[0].revents & POLLIN) {
            char v[64];
            ssize_t rd = read(wake->fd, v, sizeof v);
            (void)rd;
        }
        conns_serve(pf + 1 + n, slot, nc);
        for (int i = 0; i < n; i++)
            if (pf[1 + i].revents & POLLIN)
                accept_all(&ls[i]);
    }
    for (int i = 0; i < MPC_MAX_CONN; i++)
        conn_close(&g_conns[i]);
}

/* Takes what the host has (waiting up to timeout_ms); false: the host is
 * gone for good. */
static bool host_take(const mp_prof_control_host *h, const mpc_conn_proto *proto, int timeout_ms)
{
    int fds[MPC_MAX_CONN];
    int got = h->take(h->ctx, fds, MPC_MAX_CONN, timeout_ms);
    if (got < 0)
        return false;
    for (int i = 0; i < got && i < MPC_MAX_CONN; i++)
        conn_adopt(fds[i], proto);
    return true;
}

void mpc_loop_run_host(const mp_prof_control_host *h, const mpc_conn_proto *proto,
                       atomic_bool *stop)
{
    struct pollfd pf[MPC_MAX_CONN];
    int slot[MPC_MAX_CONN];
    while (!atomic_load(stop)) {
        if (!conns_any()) {
            /* Nothing to serve: no descriptor, no timer, only the host. */
            if (!host_take(h, proto, -1))
                break;
            continue;
        }
        int64_t now = mono_ms(), next;
        int nc = conns_due(pf, slot, now, &next);
        /* Short: a connection the host accepts meanwhile waits at most
         * this long (the host cannot wake a poll of ours). */
        int timeout = next < 0 || next - now >= HOST_POLL_MS ? HOST_POLL_MS : (int)(next - now) + 1;
        int r = poll(pf, (nfds_t)nc, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0)
            conns_serve(pf, slot, nc);
        if (!atomic_load(stop) && !host_take(h, proto, 0))
            break;
    }
    for (int i = 0; i < MPC_MAX_CONN; i++)
        conn_close(&g_conns[i]);
}

void mpc_loop_after_fork(void)
{
    for (int i = 0; i < MPC_MAX_CONN; i++)
        conn_close(&g_conns[i]);
}
