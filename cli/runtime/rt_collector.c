/* SPDX-License-Identifier: MIT */
/* The sending side of the collector's channel (rt_collector.h). No
 * allocation and no descriptor kept: each packet goes on a connection of
 * its own, a report in a memfd written with write(2), a message in the
 * packet from the stack. */
#define _GNU_SOURCE
#include "rt_collector.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <mimprof/profiling.h>

/* Set at start (single-threaded), read by any thread after. */
static struct {
    bool on;
    struct sockaddr_un addr;
    socklen_t alen;
    uint8_t token[MPT_COLL_TOKEN];
} g;
static atomic_uint g_fallbacks;

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool mpt_coll_init(const char *spec)
{
    g.on = false;
    const char *colon = spec != NULL ? strrchr(spec, ':') : NULL;
    size_t nlen = colon != NULL ? (size_t)(colon - spec) : 0;
    if (colon == NULL || nlen == 0 || nlen + 1 > sizeof g.addr.sun_path ||
        strlen(colon + 1) != 2 * MPT_COLL_TOKEN)
        return false;
    for (size_t i = 0; i < MPT_COLL_TOKEN; i++) {
        int hi = hexval(colon[1 + 2 * i]), lo = hexval(colon[2 + 2 * i]);
        if (hi < 0 || lo < 0)
            return false;
        g.token[i] = (uint8_t)(hi << 4 | lo);
    }
    memset(&g.addr, 0, sizeof g.addr);
    g.addr.sun_family = AF_UNIX;
    memcpy(g.addr.sun_path + 1, spec, nlen); /* abstract: a NUL first */
    g.alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nlen);
    g.on = true;
    return true;
}

bool mpt_coll_on(void) { return g.on; }

void mpt_coll_after_fork(void) { atomic_store(&g_fallbacks, 0); }

unsigned mpt_coll_fallbacks(void) { return atomic_load(&g_fallbacks); }

static int make_socket(void *ctx)
{
    (void)ctx;
    return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
}

static int make_memfd(void *ctx)
{
    (void)ctx;
    return memfd_create("mimprof-report", MFD_CLOEXEC);
}

/* A connection to the collector for one packet (non-blocking: a full
 * backlog is EAGAIN), or -1 with errno. */
static int dial(void)
{
    if (!g.on) {
        errno = ENOTCONN;
        return -1;
    }
    int fd = mp_prof_fd_make(make_socket, NULL);
    if (fd < 0)
        return -1;
    int r;
    while ((r = connect(fd, (struct sockaddr *)&g.addr, g.alen)) != 0 && errno == EINTR)
        ;
    if (r != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One packet on connection `c`, with `fd` attached when it is not -1.
 * Never blocks. */
static int send_on(int c, mpt_coll_hdr *h, const void *text, size_t tlen, int fd)
{
    h->magic = MPT_COLL_MAGIC;
    memcpy(h->token, g.token, sizeof h->token);
    struct iovec iov[2] = {{(void *)h, sizeof *h}, {(void *)text, tlen}};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = tlen > 0 ? 2 : 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    ssize_t r;
    while ((r = sendmsg(c, &m, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return r == (ssize_t)(sizeof *h + tlen) ? 0 : -1;
}

/* One packet on a connection of its own. 0, or -1 (errno). */
static int send_packet(mpt_coll_hdr *h, const void *text, size_t tlen, int fd)
{
    int c = dial();
    if (c < 0)
        return -1;
    int r = send_on(c, h, text, tlen, fd);
    int e = errno;
    close(c);
    errno = e;
    return r;
}

static const char *send_failure(int e)
{
    return e == EAGAIN || e == ENOBUFS  ? "its queue is full"
           : e == EMFILE || e == ENFILE ? "no descriptor to reach it"
                                        : "it is gone";
}

int mpt_coll_dial(const char **why)
{
    int c = dial();
    if (c < 0)
        *why = send_failure(errno);
    return c;
}

int mpt_coll_send_report(int conn, pid_t pid, unsigned seq, const uint8_t *buf, size_t len,
                         const uint8_t *pk, size_t pklen, int64_t from_ns, int64_t to_ns,
                         unsigned flags, const char **why)
{
    int mfd = mp_prof_fd_make(make_memfd, NULL);
    if (mfd < 0) {
        *why = "no memfd";
        if (conn >= 0)
            close(conn);
        atomic_fetch_add(&g_fallbacks, 1);
        return -1;
    }
    if (pk == NULL)
        pklen = 0;
    int rc = -1;
    if (write_all(mfd, buf, len) != 0 || (pklen > 0 && write_all(mfd, pk, pklen) != 0)) {
        *why = "the report could not be copied";
    } else {
        mpt_coll_hdr h = {.kind = MPT_COLL_REPORT,
                          .flags = flags,
                          .pid = pid,
                          .seq = seq,
                          .len = len,
                          .pklen = pklen,
                          .from_ns = from_ns,
                          .to_ns = to_ns};
        if (conn >= 0) {
            rc = send_on(conn, &h, NULL, 0, mfd);
            int e = errno;
            close(conn);
            conn = -1;
            errno = e;
        } else {
            rc = send_packet(&h, NULL, 0, mfd);
        }
        if (rc != 0)
            *why = send_failure(errno);
    }
    if (conn >= 0)
        close(conn);
    close(mfd);
    if (rc != 0)
        atomic_fetch_add(&g_fallbacks, 1);
    return rc;
}

bool mpt_coll_say(const char *text, size_t len)
{
    if (!g.on)
        return false;
    if (len > MPT_COLL_TEXT_MAX)
        len = MPT_COLL_TEXT_MAX;
    mpt_coll_hdr h = {.kind = MPT_COLL_MESSAGE, .pid = getpid(), .len = len};
    return send_packet(&h, text, len, -1) == 0;
}

/* Waits at most a second for a packet on `c` (an answer), and reads it. */
static void await_answer(int c)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, 1000)) < 0 && errno == EINTR)
        ;
    mpt_coll_hdr h;
    if (r > 0)
        (void)recv(c, &h, sizeof h, MSG_DONTWAIT);
}

int mpt_coll_hello(int page_fd, bool wait)
{
    mpt_coll_hdr h = {.kind = MPT_COLL_HELLO, .flags = wait ? MPT_COLL_ACK : 0, .pid = getpid()};
    if (!wait)
        return send_packet(&h, NULL, 0, page_fd);
    int c = dial();
    if (c < 0)
        return -1;
    int r = send_on(c, &h, NULL, 0, page_fd);
    if (r == 0)
        await_answer(c);
    close(c);
    return r;
}

void mpt_coll_bye(void)
{
    mpt_coll_hdr h = {.kind = MPT_COLL_BYE, .pid = getpid()};
    (void)send_packet(&h, NULL, 0, -1);
}

/* The descriptors of the FETCH answer on `c` into fds (at most max; the
 * rest closed). How many, or -1. */
static int receive_fds(int c, int *fds, int max)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, 1000)) < 0 && errno == EINTR)
        ;
    if (r <= 0)
        return -1;
    mpt_coll_hdr h;
    struct iovec iov = {&h, sizeof h};
    union {
        char buf[CMSG_SPACE(MPT_COLL_FETCH_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t got;
    while ((got = recvmsg(c, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR)
        ;
    int n = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm != NULL; cm = CMSG_NXTHDR(&m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int f;
            memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
            if (n < max && got == (ssize_t)sizeof h && h.magic == MPT_COLL_MAGIC)
                fds[n++] = f;
            else
                close(f);
        }
    }
    return got == (ssize_t)sizeof h && h.magic == MPT_COLL_MAGIC ? n : -1;
}

int mpt_coll_fetch(int *fds, int max)
{
    int c = dial();
    if (c < 0)
        return -1;
    mpt_coll_hdr h = {.kind = MPT_COLL_FETCH, .pid = getpid()};
    int n = send_on(c, &h, NULL, 0, -1) == 0 ? receive_fds(c, fds, max) : -1;
    close(c);
    return n;
}
