/* SPDX-License-Identifier: MIT */
/* The processes of the tree the collector knows (collector.h): whether
 * any is alive (the collector's end), and the control sockets it holds
 * for them (rt_collector.h, HELLO with a page; FETCH).
 *
 * Hosting a control socket: the collector binds `@mimprof-ctl.<pid>` for
 * a process that asked (its HELLO came with a page), accepts its
 * connections, keeps at most MPT_COLL_FETCH_MAX of them, adds one to the
 * page's seq and wakes the futex on it; the process's control thread
 * then takes them (FETCH) and serves them as its own. The process holds
 * no listening socket (rt_ctlhost.c). A connection waits here at most
 * PENDING_MS: a process that does not take it (stopped, gone) does not
 * keep a client waiting longer than its own deadline would. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling_control.h>

#include "collector.h"
#include "rt_collector.h"

#define PENDING_MS 10000

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static mpt_cproc *find(mpt_cprocs *t, pid_t pid)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].pid == pid)
            return &t->v[i];
    return NULL;
}

static void drop_pending(mpt_cproc *p)
{
    for (int i = 0; i < p->npending; i++)
        close(p->pending[i]);
    p->npending = 0;
}

static void unmap_page(mpt_cproc *p)
{
    if (p->page != NULL)
        munmap(p->page, MPT_COLL_PAGE);
    p->page = NULL;
}

static void forget(mpt_cprocs *t, size_t i)
{
    mpt_cproc *p = &t->v[i];
    if (t->ended != NULL)
        t->ended(t->ended_ctx, p->pid);
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->ctl >= 0)
        close(p->ctl);
    drop_pending(p);
    unmap_page(p);
    t->v[i] = t->v[--t->n];
}

/* The control socket of `self_pid` (its own view of its pid), or -1
 * (another process holds the name: not hosted). */
static int bind_ctl(long self_pid)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name(self_pid, a.sun_path, sizeof a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || n == 0)
        goto fail;
    if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) !=
            0 ||
        listen(fd, 16) != 0)
        goto fail;
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

static void wake(mpt_cproc *p)
{
    if (p->page == NULL)
        return;
    atomic_fetch_add(&p->page->seq, 1);
    syscall(SYS_futex, &p->page->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void mpt_cprocs_hello(mpt_cprocs *t, pid_t pid, long self_pid, int page_fd)
{
    mpt_cproc *p = find(t, pid);
    if (p == NULL) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            mpt_cproc *v = realloc(t->v, cap * sizeof *v);
            if (v == NULL)
                return; /* not watched: the collector may end before it */
            t->v = v;
            t->cap = cap;
        }
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 && errno == ESRCH) {
            /* gone already (its last report came after its end) */
            if (t->ended != NULL)
                t->ended(t->ended_ctx, pid);
            return;
        }
        p = &t->v[t->n++];
        *p = (mpt_cproc){.pid = pid, .self_pid = self_pid, .pidfd = pidfd, .ctl = -1};
    }
    t->last_hello_ms = mono_ms();
    if (page_fd < 0)
        return;
    /* A new page: the process's own (a program it executed replaced the
     * one that said hello first, with the same pid). */
    unmap_page(p);
    void *m = mmap(NULL, MPT_COLL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
    p->page = m == MAP_FAILED ? NULL : m;
    if (p->page == NULL)
        return;
    if (p->ctl < 0 || p->self_pid != self_pid) {
        if (p->ctl >= 0)
            close(p->ctl);
        p->self_pid = self_pid;
        p->ctl = bind_ctl(self_pid);
    }
    if (p->npending > 0)
        wake(p);
}

void mpt_cprocs_bye(mpt_cprocs *t, pid_t pid)
{
    mpt_cproc *p = find(t, pid);
    if (p != NULL)
        forget(t, (size_t)(p - t->v));
}

void mpt_cprocs_fetch(mpt_cprocs *t, pid_t pid, int conn, const mpt_coll_hdr *req)
{
    mpt_cproc *p = find(t, pid);
    mpt_coll_hdr h = *req;
    h.kind = MPT_COLL_FETCH;
    h.len = p != NULL ? (uint64_t)p->npending : 0;
    struct iovec iov = {&h, sizeof h};
    union {
        char buf[CMSG_SPACE(MPT_COLL_FETCH_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (h.len > 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(h.len * sizeof(int));
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(h.len * sizeof(int));
        memcpy(CMSG_DATA(cm), p->pending, h.len * sizeof(int));
    }
    ssize_t r;
    while ((r = sendmsg(conn, &m, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (p != NULL && r == (ssize_t)sizeof h)
        drop_pending(p); /* the process holds them now */
}

size_t mpt_cprocs_pollfds(const mpt_cprocs *t, struct pollfd *pf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n && n + 2 <= cap; i++) {
        pf[n++] = (struct pollfd){.fd = t->v[i].pidfd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = t->v[i].ctl, .events = POLLIN};
    }
    return n;
}

/* The connections waiting at p's control socket: kept for the process
 * (at most MPT_COLL_FETCH_MAX), woken once. */
static void accept_ctl(mpt_cproc *p)
{
    bool added = false;
    int fd;
    while ((fd = accept4(p->ctl, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (p->npending == MPT_COLL_FETCH_MAX) {
            close(fd); /* the client sees the end at once: busy */
            continue;
        }
        if (p->npending == 0)
            p->pending_since_ms = mono_ms();
        p->pending[p->npending++] = fd;
        added = true;
    }
    if (added)
        wake(p);
}

static bool alive(const mpt_cproc *p)
{
    if (p->pidfd >= 0) {
        struct pollfd q = {.fd = p->pidfd, .events = POLLIN};
        return poll(&q, 1, 0) == 0;
    }
    return kill(p->pid, 0) == 0 || errno == EPERM;
}

/* Connections that waited too long for their process are dropped (the
 * clients see the end). No system call. */
static void expire_pending(mpt_cprocs *t)
{
    int64_t now = mono_ms();
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].npending > 0 && now - t->v[i].pending_since_ms > PENDING_MS)
            drop_pending(&t->v[i]);
}

void mpt_cprocs_events(mpt_cprocs *t, const struct pollfd *pf, size_t npf)
{
    /* pf is as mpt_cprocs_pollfds made it, before any change to t: what
     * poll() said is all that is looked at (no call per process: a
     * service of thousands of processes reports all the time). */
    size_t n = npf / 2 < t->n ? npf / 2 : t->n;
    for (size_t i = 0; i < n; i++)
        if (t->v[i].ctl >= 0 && (pf[2 * i + 1].revents & POLLIN))
            accept_ctl(&t->v[i]);
    for (size_t i = n; i-- > 0;)
        if (t->v[i].pidfd >= 0 && (pf[2 * i].revents & (POLLIN | POLLHUP | POLLERR)))
            forget(t, i); /* ended */
    expire_pending(t);
}

void mpt_cprocs_sweep(mpt_cprocs *t)
{
    for (size_t i = t->n; i-- > 0;)
        if (!alive(&t->v[i]))
            forget(t, i);
    expire_pending(t);
}

bool mpt_cprocs_known(const mpt_cprocs *t, pid_t pid)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].pid == pid)
            return true;
    return false;
}

size_t mpt_cprocs_alive(mpt_cprocs *t)
{
    mpt_cprocs_sweep(t);
    return t->n;
}

void mpt_cprocs_free(mpt_cprocs *t)
{
    while (t->n > 0)
        forget(t, t->n - 1);
    free(t->v);
    t->v = NULL;
    t->cap = 0;
}
