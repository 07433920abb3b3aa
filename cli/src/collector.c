/* SPDX-License-Identifier: MIT */
/* The collector's loop (collector.h): connections in, one packet each
 * (rt_collector.h), report files out, messages passed on, the processes
 * of the tree watched (collector_procs.c). */
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
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "rt_collector.h"

/* At most this many connections open at once; more wait in the backlog. */
#define MAX_CONNS 128
/* A connection whose packet has not come within this is dropped. */
#define CONN_MS 5000

typedef struct {
    int fd;
    pid_t pid; /* SO_PEERCRED */
    int64_t deadline_ms;
} conn;

typedef struct {
    const mpt_coll_opts *o;
    mpt_store store;
    mpt_cpyro *pyro; /* uploads, or NULL */
    mpt_csyms *syms; /* names unsymbolized reports, or NULL */
    int notify;      /* the pipe to `mimprof run` while the command runs, else -1 */
    int log;         /* DIR/mimprof.log once opened, else -1 */
    unsigned bad;    /* packets that were not ours */
    mpt_cprocs procs;
    conn conns[MAX_CONNS]; /* accepted, their packet not read yet */
    size_t nconns;
    bool root_done;         /* the command's process has ended */
    bool said_final;        /* the final summary was said at the command's end */
    int64_t empty_since_ms; /* since when nothing is alive (0: something is) */
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
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < total) {
        c->bad++; /* a mapping past its end would fault at the first read */
        return;
    }
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
        mpt_cpyro_add(c->pyro, (pid_t)h->pid, buf, len, pk, pklen, h->from_ns, h->to_ns,
                      (h->flags & MPT_COLL_FINAL) != 0);
    free(named);
    free(pknamed);
    munmap(map, total);
}

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A process's uploads after the final summary stopped them (a daemon
 * that said hello late): started again. */
static void ensure_pyro(collector *c)
{
    if (c->pyro != NULL || !c->o->upload)
        return;
    c->said_final = false; /* more to say at the end */
    char why[600];
    c->pyro = mpt_cpyro_start(c->o->period_ms, why, sizeof why);
}

/* One packet of connection k; false while none has come (the
 * connection stays), true when it is done (the connection closed). */
static bool one(collector *c, size_t k)
{
    conn *cn = &c->conns[k];
    mpt_coll_hdr h;
    char text[MPT_COLL_TEXT_MAX];
    struct iovec iov[2] = {{&h, sizeof h}, {text, sizeof text}};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {
        .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(cn->fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return false;
    /* Every descriptor that came with it is ours to close. */
    int fd = -1;
    for (struct cmsghdr *cm = r > 0 ? CMSG_FIRSTHDR(&m) : NULL; cm != NULL;
         cm = CMSG_NXTHDR(&m, cm))
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
    if (r <= 0) {
        /* closed without a packet */
    } else if ((size_t)r < sizeof h || h.magic != MPT_COLL_MAGIC ||
               memcmp(h.token, c->o->token, sizeof h.token) != 0) {
        c->bad++;
    } else if (h.kind == MPT_COLL_REPORT) {
        mpt_cprocs_hello(&c->procs, cn->pid, (long)h.pid, -1);
        if (h.flags & MPT_COLL_UPLOAD)
            ensure_pyro(c);
        report(c, &h, fd);
    } else if (h.kind == MPT_COLL_MESSAGE) {
        size_t n = (size_t)r - sizeof h;
        out(c, text, n < h.len ? n : (size_t)h.len);
    } else if (h.kind == MPT_COLL_HELLO) {
        mpt_cprocs_hello(&c->procs, cn->pid, (long)h.pid, fd);
        if (h.flags & MPT_COLL_ACK) /* its control socket is bound now */
            (void)send(cn->fd, &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else if (h.kind == MPT_COLL_BYE) {
        mpt_cprocs_bye(&c->procs, cn->pid);
    } else if (h.kind == MPT_COLL_FETCH) {
        mpt_cprocs_fetch(&c->procs, cn->pid, cn->fd, &h);
    } else {
        c->bad++;
    }
    if (fd >= 0)
        close(fd);
    close(cn->fd);
    c->conns[k] = c->conns[--c->nconns];
    return true;
}

/* Accepts what waits in the backlog, while there is room. */
static void accept_all(collector *c, int lfd)
{
    while (c->nconns < MAX_CONNS) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
            close(fd);
            continue;
        }
        c->conns[c->nconns++] = (conn){.fd = fd, .pid = cr.pid, .deadline_ms = mono_ms() + CONN_MS};
    }
}

/* Reads every packet that has come, accepting as it goes. */
static void drain(collector *c, int lfd)
{
    for (int round = 0; round < 64; round++) {
        accept_all(c, lfd);
        bool any = false;
        for (size_t k = c->nconns; k-- > 0;)
            any |= one(c, k);
        if (!any)
            return;
    }
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* What the collector has done, when there is something to say. With
 * `end`, the uploads are flushed and stopped. */
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
        if (end) {
            mpt_cpyro_free(c->pyro);
            c->pyro = NULL;
        }
    }
}

/* The command's process ended: what is queued is read; when no process
 * of the tree is alive any more, the final summary; else (a daemon) what
 * was done so far. `mimprof run` is let go either way. */
static void root_exited(collector *c, int lfd)
{
    drain(c, lfd);
    c->said_final = mpt_cprocs_alive(&c->procs) == 0;
    summary(c, c->said_final);
    if (c->notify >= 0)
        close(c->notify);
    c->notify = -1;
    c->root_done = true;
}

/* Whether the collector is done: the command ended, nothing alive and
 * nothing open for a grace (a child may not have said hello yet). */
static bool finished(collector *c)
{
    if (!c->root_done)
        return false;
    if (c->nconns > 0 || c->procs.n > 0) {
        c->empty_since_ms = 0;
        return false;
    }
    int64_t now = mono_ms();
    if (c->empty_since_ms == 0 || c->procs.last_hello_ms > c->empty_since_ms)
        c->empty_since_ms = now;
    return now - c->empty_since_ms >= MPT_COLL_GRACE_MS;
}

/* Connections whose packet never came are closed. */
static void expire(collector *c)
{
    int64_t now = mono_ms();
    for (size_t k = c->nconns; k-- > 0;)
        if (now >= c->conns[k].deadline_ms) {
            close(c->conns[k].fd);
            c->conns[k] = c->conns[--c->nconns];
        }
}

int mpt_collector_main(int lfd, int notify, int ctl, const mpt_coll_opts *o)
{
    static collector c; /* large (its connections): not on the stack */
    c = (collector){.o = o, .notify = notify, .log = -1};
    mpt_store_init(&c.store, o);
    if (notify >= 0)
        (void)fcntl(notify, F_SETFL, O_NONBLOCK);
    (void)fcntl(lfd, F_SETFL, O_NONBLOCK);
    if (o->upload) {
        char why[600];
        c.pyro = mpt_cpyro_start(o->period_ms, why, sizeof why);
        if (c.pyro == NULL)
            say(&c, "mimprof: collector: no uploads to Pyroscope: %s\n", why);
    }
    if (o->symbolize != 0)
        c.syms = mpt_csyms_new(o->symbolize);
    enum { FIXED = 2 };
    struct pollfd *pf = NULL;
    size_t pfcap = 0;
    for (;;) {
        size_t need = FIXED + MAX_CONNS + 2 * c.procs.n;
        if (need > pfcap) {
            struct pollfd *np = realloc(pf, need * sizeof *pf);
            if (np == NULL)
                break;
            pf = np;
            pfcap = need;
        }
        pf[0] = (struct pollfd){.fd = lfd, .events = c.nconns < MAX_CONNS ? POLLIN : 0};
        pf[1] = (struct pollfd){.fd = ctl, .events = POLLIN};
        for (size_t k = 0; k < c.nconns; k++)
            pf[FIXED + k] = (struct pollfd){.fd = c.conns[k].fd, .events = POLLIN};
        size_t nconns = c.nconns;
        size_t nprocs = mpt_cprocs_pollfds(&c.procs, pf + FIXED + nconns, pfcap - FIXED - nconns);
        int64_t due = c.pyro != NULL ? mpt_cpyro_due(c.pyro) : 0;
        int timeout = c.root_done || nconns > 0 || c.procs.n > 0 ? 1000 : -1;
        if (due != 0) {
            int64_t ms = (due - now_ns()) / 1000000 + 1;
            ms = ms < 0 ? 0 : ms;
            if (timeout < 0 || ms < timeout)
                timeout = (int)ms;
        }
        int r = poll(pf, FIXED + nconns + nprocs, timeout);
        if (r < 0 && errno != EINTR)
            break;
        if (c.pyro != NULL)
            mpt_cpyro_flush(c.pyro, now_ns(), false);
        if (r > 0) {
            if (ctl >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
                close(ctl);
                ctl = -1;
                root_exited(&c, lfd);
                continue; /* what poll() said of the rest is stale now */
            }
            for (size_t k = nconns; k-- > 0;)
                if (pf[FIXED + k].revents != 0 && k < c.nconns)
                    one(&c, k);
            mpt_cprocs_events(&c.procs, pf + FIXED + nconns, nprocs);
            if (pf[0].revents & POLLIN)
                accept_all(&c, lfd);
        } else if (r == 0) {
            mpt_cprocs_sweep(&c.procs); /* idle: a process without a pidfd may have ended */
        }
        expire(&c);
        if (finished(&c))
            break;
    }
    free(pf);
    if (!c.said_final || c.pyro != NULL)
        summary(&c, true);
    if (c.bad > 0)
        say(&c, "mimprof: collector: %u packet%s not understood\n", c.bad, c.bad == 1 ? "" : "s");
    mpt_cpyro_free(c.pyro);
    mpt_csyms_free(c.syms);
    mpt_store_free(&c.store);
    mpt_cprocs_free(&c.procs);
    while (c.nconns > 0)
        close(c.conns[--c.nconns].fd);
    if (c.log >= 0)
        close(c.log);
    if (c.notify >= 0)
        close(c.notify);
    return 0;
}
