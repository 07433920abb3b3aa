/* SPDX-License-Identifier: MIT */
/* The sending side of the collector's channel (rt_collector.h). No
 * allocation: a report travels in a memfd written with write(2), a
 * message in one packet from the stack. */
#define _GNU_SOURCE
#include "rt_collector.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mimprof/profiling.h>

/* The inherited socket; fd -1 when there is none or it is not ours any
 * more (mp_prof_fd_check forgets it). Set at start and in a forked child,
 * both single-threaded moments; read by the threads that take reports
 * (under report_lock) and by messages (any thread: a send on a socket
 * that was closed under it fails, and the next check forgets it). */
static mp_prof_owned_fd g_sock = {.fd = -1};
static atomic_uint g_fallbacks;

static bool parse_spec(const char *spec, mp_prof_owned_fd *o)
{
    if (spec == NULL)
        return false;
    char *end;
    errno = 0;
    long fd = strtol(spec, &end, 10);
    if (errno != 0 || *end != ':' || fd < 0 || fd > 1 << 30)
        return false;
    unsigned long long dev = strtoull(end + 1, &end, 10);
    if (*end != ':')
        return false;
    unsigned long long ino = strtoull(end + 1, &end, 10);
    if (*end != '\0')
        return false;
    *o = (mp_prof_owned_fd){.fd = (int)fd, .dev = (dev_t)dev, .ino = (ino_t)ino};
    return mp_prof_fd_check(o);
}

bool mpt_coll_init(const char *spec)
{
    if (!parse_spec(spec, &g_sock))
        g_sock = MP_PROF_OWNED_FD_NONE;
    return g_sock.fd >= 0;
}

bool mpt_coll_on(void) { return g_sock.fd >= 0; }

void mpt_coll_close_unprofiled(const char *spec)
{
    mp_prof_owned_fd o;
    if (parse_spec(spec, &o))
        close(o.fd);
}

void mpt_coll_after_fork(bool profiled, bool exec_inherits)
{
    atomic_store(&g_fallbacks, 0);
    if (!mp_prof_fd_check(&g_sock))
        return;
    if (!profiled)
        mp_prof_fd_close(&g_sock);
    else if (!exec_inherits)
        (void)fcntl(g_sock.fd, F_SETFD, FD_CLOEXEC);
}

unsigned mpt_coll_fallbacks(void) { return atomic_load(&g_fallbacks); }

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

/* One packet, with `fd` attached when it is not -1. Never blocks. */
static int send_packet(const mpt_coll_hdr *h, const void *text, size_t tlen, int fd)
{
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
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t r;
    while ((r = sendmsg(g_sock.fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return r == (ssize_t)(sizeof *h + tlen) ? 0 : -1;
}

int mpt_coll_send_report(pid_t pid, unsigned seq, const uint8_t *buf, size_t len, const uint8_t *pk,
                         size_t pklen, int64_t from_ns, int64_t to_ns, unsigned flags,
                         const char **why)
{
    *why = "no collector";
    if (!mp_prof_fd_check(&g_sock)) {
        *why = "its descriptor was closed by the program";
        atomic_fetch_add(&g_fallbacks, 1);
        return -1;
    }
    int mfd = memfd_create("mimprof-report", MFD_CLOEXEC);
    if (mfd < 0) {
        *why = "no memfd";
        atomic_fetch_add(&g_fallbacks, 1);
        return -1;
    }
    if (pk == NULL)
        pklen = 0;
    int rc = -1;
    if (write_all(mfd, buf, len) != 0 || (pklen > 0 && write_all(mfd, pk, pklen) != 0)) {
        *why = "the report could not be copied";
    } else {
        mpt_coll_hdr h = {.magic = MPT_COLL_MAGIC,
                          .kind = MPT_COLL_REPORT,
                          .flags = flags,
                          .pid = pid,
                          .seq = seq,
                          .len = len,
                          .pklen = pklen,
                          .from_ns = from_ns,
                          .to_ns = to_ns};
        rc = send_packet(&h, NULL, 0, mfd);
        if (rc != 0)
            *why = errno == EAGAIN || errno == ENOBUFS ? "its queue is full" : "it is gone";
    }
    close(mfd);
    if (rc != 0)
        atomic_fetch_add(&g_fallbacks, 1);
    return rc;
}

bool mpt_coll_say(const char *text, size_t len)
{
    if (g_sock.fd < 0)
        return false;
    if (len > MPT_COLL_TEXT_MAX)
        len = MPT_COLL_TEXT_MAX;
    mpt_coll_hdr h = {
        .magic = MPT_COLL_MAGIC, .kind = MPT_COLL_MESSAGE, .pid = getpid(), .len = len};
    return mp_prof_fd_check(&g_sock) && send_packet(&h, text, len, -1) == 0;
}
