/* SPDX-License-Identifier: MIT */
/* The collector's loop (collector.h): packets in (rt_collector.h), report
 * files out, messages passed on. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "rt_collector.h"

typedef struct {
    const mpt_coll_opts *o;
    mpt_store store;
    mpt_cpyro *pyro; /* uploads, or NULL */
    mpt_csyms *syms; /* names unsymbolized reports, or NULL */
    int notify;      /* the pipe to `mimprof run` while the command runs, else -1 */
    int log;         /* DIR/mimprof.log once opened, else -1 */
    unsigned bad;    /* packets that were not ours */
} collector;

/* A message: to `mimprof run` while it waits for the command (it prints
 * them), else appended to DIR/mimprof.log. Never blocks: a full pipe
 * sends the line to the log. */
static void out(collector *c, const char *text, size_t len)
{
    if (c->notify >= 0) {
        ssize_t w = write(c->notify, text, len);
        if (w == (ssize_t)len)
            return;
    }
    if (c->log < 0 && c->o->dir != NULL) {
        char path[4200];
        snprintf(path, sizeof path, "%s/mimprof.log", c->o->dir);
        c->log = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    }
    if (c->log >= 0) {
        ssize_t w = write(c->log, text, len);
        (void)w;
    }
}

static void say(collector *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(collector *c, const char *fmt, ...)
{
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        out(c, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void report(collector *c, const mpt_coll_hdr *h, int fd)
{
    if (fd < 0 || h->len == 0 || h->len > SIZE_MAX / 2 || h->pklen > SIZE_MAX / 2) {
        c->bad++;
        return;
    }
    size_t total = (size_t)(h->len + h->pklen);
    uint8_t *map = mmap(NULL, total, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        say(c, "mimprof: collector: report %llu of pid %lld unreadable: %s\n",
            (unsigned long long)h->seq, (long long)h->pid, strerror(errno));
        return;
    }
    char why[600];
    const uint8_t *buf = map, *pk = h->pklen > 0 ? map + h->len : NULL;
    size_t len = (size_t)h->len, pklen = (size_t)h->pklen;
    uint8_t *named = NULL, *pknamed = NULL;
    if (c->syms != NULL) {
        if (mpt_csyms_apply(c->syms, buf, len, &named, &len) == 0)
            buf = named;
        else
            len = (size_t)h->len;
        if (pk != NULL && mpt_csyms_apply(c->syms, pk, pklen, &pknamed, &pklen) == 0)
            pk = pknamed;
        else
            pklen = (size_t)h->pklen;
    }
    if ((h->flags & MPT_COLL_WRITE) && c->o->dir != NULL &&
        mpt_store_write(&c->store, (pid_t)h->pid, (unsigned)h->seq, buf, len, pk, pklen, why,
                        sizeof why) != 0)
        say(c, "mimprof: collector: %s; report not written\n", why);
    if ((h->flags & MPT_COLL_UPLOAD) && c->pyro != NULL)
        mpt_cpyro_add(c->pyro, (pid_t)h->pid, buf, len, pk, pklen, h->from_ns, h->to_ns);
    free(named);
    free(pknamed);
    munmap(map, total);
}

/* One packet; false at end of file. With `nowait`, false also when
 * none is queued (*eof says which). */
static bool one(collector *c, int sock, bool nowait, bool *eof)
{
    *eof = false;
    mpt_coll_hdr h;
    char text[MPT_COLL_TEXT_MAX];
    struct iovec iov[2] = {{&h, sizeof h}, {text, sizeof text}};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
        .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | (nowait ? MSG_DONTWAIT : 0));
    if (r < 0)
        return errno == EINTR || (!nowait && errno == EAGAIN);
    if (r == 0) {
        *eof = true;
        return false;
    }
    /* Every descriptor that came with it is ours to close. */
    int fd = -1;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm != NULL; cm = CMSG_NXTHDR(&m, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int f;
                memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
                if (fd < 0)
                    fd = f;
                else
                    close(f);
            }
        }
    if ((size_t)r < sizeof h || h.magic != MPT_COLL_MAGIC) {
        c->bad++;
    } else if (h.kind == MPT_COLL_REPORT) {
        report(c, &h, fd);
    } else if (h.kind == MPT_COLL_MESSAGE) {
        size_t n = (size_t)r - sizeof h;
        out(c, text, n < h.len ? n : (size_t)h.len);
    } else {
        c->bad++;
    }
    if (fd >= 0)
        close(fd);
    return true;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* What the collector has done, when there is something to say. */
static void summary(collector *c, bool end)
{
    if (c->store.removed > 0 && !c->o->quiet)
        say(c,
            "mimprof: collector: %u report%s written, %u older one%s removed (keep %u per "
            "process, %llu MiB in all)\n",
            c->store.written, c->store.written == 1 ? "" : "s", c->store.removed,
            c->store.removed == 1 ? "" : "s", c->o->keep,
            (unsigned long long)(c->o->keep_bytes >> 20));
    if (c->pyro != NULL) {
        char line[1200];
        mpt_cpyro_flush(c->pyro, 0, true);
        mpt_cpyro_summary(c->pyro, end, !c->o->quiet, line, sizeof line);
        if (line[0] != '\0')
            out(c, line, strlen(line));
    }
}

/* The command's process ended and `mimprof run` closed its copy of the
 * socket: what is queued is read; at end of file nobody holds it any
 * more (true: the collector ends); else a daemon does, and `mimprof run`
 * is let go. */
static bool root_exited(collector *c, int sock)
{
    bool eof = false;
    while (one(c, sock, true, &eof))
        ;
    summary(c, eof);
    if (c->notify >= 0)
        close(c->notify);
    c->notify = -1;
    return eof;
}

int mpt_collector_main(int sock, int notify, int ctl, const mpt_coll_opts *o)
{
    collector c = {.o = o, .notify = notify, .log = -1};
    mpt_store_init(&c.store, o);
    if (notify >= 0)
        (void)fcntl(notify, F_SETFL, O_NONBLOCK);
    if (o->upload) {
        char why[600];
        c.pyro = mpt_cpyro_start(o->period_ms, why, sizeof why);
        if (c.pyro == NULL)
            say(&c, "mimprof: collector: no uploads to Pyroscope: %s\n", why);
    }
    if (o->symbolize != 0)
        c.syms = mpt_csyms_new(o->symbolize);
    bool ended = false; /* summarised at the end of file */
    for (;;) {
        int64_t due = c.pyro != NULL ? mpt_cpyro_due(c.pyro) : 0;
        int timeout = -1;
        if (due != 0) {
            int64_t ms = (due - now_ns()) / 1000000 + 1;
            timeout = ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
        }
        struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = ctl, .events = POLLIN}};
        int r = poll(p, ctl >= 0 ? 2 : 1, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (c.pyro != NULL)
            mpt_cpyro_flush(c.pyro, now_ns(), false);
        if (r <= 0)
            continue;
        if (ctl >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            close(ctl);
            ctl = -1;
            if (root_exited(&c, sock)) {
                ended = true;
                break;
            }
            continue;
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            bool eof;
            if (!one(&c, sock, true, &eof) && eof)
                break;
        }
    }
    if (!ended)
        summary(&c, true);
    if (c.bad > 0)
        say(&c, "mimprof: collector: %u packet%s not understood\n", c.bad, c.bad == 1 ? "" : "s");
    mpt_cpyro_free(c.pyro);
    mpt_csyms_free(c.syms);
    mpt_store_free(&c.store);
    if (c.log >= 0)
        close(c.log);
    if (c.notify >= 0)
        close(c.notify);
    return 0;
}
