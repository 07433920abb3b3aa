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

/* Connections held while their packet has not come. The backlog is
 * emptied at once whatever their number, and a connection whose packet
 * is there is read as it is accepted: it never waits for a slot. So idle
 * connections (another local user can connect: the name is in
 * /proc/net/unix) neither fill the backlog nor take the tree's room:
 * peers that are not processes of the tree (no HELLO or REPORT from
 * their pid yet) hold at most STRANGER_CONNS slots, PER_PEER each, for
 * STRANGER_MS; the rest of the slots are kept for the tree. */
#define MAX_CONNS      128
#define STRANGER_CONNS 32
#define PER_PEER       2
/* A connection whose packet has not come within this is closed: a
 * process of the tree sends it right after connect(). */
#define CONN_MS     5000
#define STRANGER_MS 1000

typedef struct {
    int fd;
    pid_t pid;  /* SO_PEERCRED */
    bool known; /* a process of the tree */
    int64_t deadline_ms;
} conn;

typedef struct {
    const mpt_coll_opts *o;
    mpt_store store;
    mpt_cpyro *pyro;  /* uploads, or NULL */
    mpt_csyms *syms;  /* names unsymbolized reports, or NULL */
    mpt_cwin *wins;   /* the service's windows in the directory, or NULL */
    int notify;       /* the pipe to `mimprof run` while the command runs, else -1 */
    int log;          /* DIR/mimprof.log once opened, else -1 */
    unsigned bad;     /* packets that were not ours */
    unsigned refused; /* connections closed without a packet: over a limit, or idle */
    unsigned said_bad, said_refused; /* of them, said in a summary */
    char lost_why[600];              /* the reason of reports not written last said */
    unsigned uploads;                /* reports handed to the uploads */
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

/* The reason of a failure without what differs from one report to the
 * next (the file's name): "cannot write DIR/heap.1.2.pb.gz: No space
 * left on device" is "No space left on device". */
static const char *reason(const char *why)
{
    const char *colon = strrchr(why, ':');
    return colon != NULL && colon[1] == ' ' ? colon + 2 : why;
}

/* A report not written: said once per reason, then counted (the summary
 * says how many were lost and why). */
static void lost(collector *c, const char *why)
{
    if (strcmp(reason(why), c->lost_why) == 0)
        return;
    snprintf(c->lost_why, sizeof c->lost_why, "%s", reason(why));
    say(c,
        "mimprof: collector: %s; report not written (the next ones lost for this reason are "
        "counted in the summary)\n",
        why);
}

/* A packet's text (a runtime message) as the collector passes it on:
 * every control character but the line's end escaped (\xNN), so that a
 * packet cannot move the terminal's cursor, ring it or retitle it. */
static void out_text(collector *c, const char *text, size_t len)
{
    char buf[4 * MPT_COLL_TEXT_MAX + 1];
    size_t w = 0;
    for (size_t i = 0; i < len && w + 4 < sizeof buf; i++) {
        unsigned char ch = (unsigned char)text[i];
        if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f)
            w += (size_t)snprintf(buf + w, sizeof buf - w, "\\x%02x", ch);
        else
            buf[w++] = (char)ch;
    }
    out(c, buf, w);
}

/* The pid a process names itself by (its control socket's name): the
 * kernel's (SO_PEERCRED) when it shares the collector's pid namespace,
 * so that no process of the tree can take another's name; its own view
 * only from another namespace, where the two differ. */
static long self_name(pid_t kernel_pid, long claimed)
{
    char path[64];
    struct stat mine, theirs;
    snprintf(path, sizeof path, "/proc/%ld/ns/pid", (long)kernel_pid);
    if (stat("/proc/self/ns/pid", &mine) != 0 || stat(path, &theirs) != 0 ||
        (mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev))
        return (long)kernel_pid;
    return claimed;
}

/* A report of `pid` (SO_PEERCRED: the kernel's word, never the packet's,
 * names its file and its upload). */
static void report(collector *c, pid_t pid, const mpt_coll_hdr *h, int fd)
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
        say(c, "mimprof: collector: report %llu of pid %ld unreadable: %s\n",
            (unsigned long long)h->seq, (long)pid, strerror(errno));
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
        mpt_store_write(&c->store, pid, (unsigned)h->seq, buf, len, pk, pklen, why, sizeof why) !=
            0)
        lost(c, why);
    if ((h->flags & MPT_COLL_WRITE) && c->wins != NULL)
        mpt_cwin_add(c->wins, pid, buf, len, pk, pklen, h->to_ns);
    if ((h->flags & MPT_COLL_UPLOAD) && c->pyro != NULL) {
        mpt_cpyro_add(c->pyro, pid, buf, len, pk, pklen, h->from_ns, h->to_ns,
                      (h->flags & MPT_COLL_FINAL) != 0);
        c->uploads++;
    }
    free(named);
    free(pknamed);
    munmap(map, total);
}

/* A window of the service, merged: written under the retention rule. */
static void window_out(void *ctx, int64_t end_ns, const uint8_t *buf, size_t len, const uint8_t *pk,
                       size_t pklen)
{
    collector *c = ctx;
    char why[600];
    if (mpt_store_write_window(&c->store, (uint64_t)(end_ns / 1000000), buf, len, pk, pklen, why,
                               sizeof why) != 0)
        lost(c, why);
}

/* A process of the tree ended: its files are under the cap as the rest
 * (collector_store.c). */
static void store_ended(void *ctx, pid_t pid) { mpt_store_ended(ctx, pid); }

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
        if (h.flags & MPT_COLL_UPLOAD)
            ensure_pyro(c);
        report(c, cn->pid, &h, fd);
        /* after the report: a process already gone is said ended to the
         * store once its report is there */
        mpt_cprocs_hello(&c->procs, cn->pid, self_name(cn->pid, (long)h.pid), -1);
    } else if (h.kind == MPT_COLL_MESSAGE) {
        size_t n = (size_t)r - sizeof h;
        out_text(c, text, n < h.len ? n : (size_t)h.len);
    } else if (h.kind == MPT_COLL_HELLO) {
        mpt_cprocs_hello(&c->procs, cn->pid, self_name(cn->pid, (long)h.pid), fd);
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

static void close_conn(collector *c, size_t k)
{
    close(c->conns[k].fd);
    c->conns[k] = c->conns[--c->nconns];
    c->refused++;
}

/* The oldest held stranger's connection (of peer `pid`, or of any with
 * pid 0), or MAX_CONNS; how many there are in *count. */
static size_t oldest_stranger(const collector *c, pid_t pid, size_t *count)
{
    size_t old = MAX_CONNS;
    *count = 0;
    for (size_t i = 0; i < c->nconns; i++)
        if (!c->conns[i].known && (pid == 0 || c->conns[i].pid == pid)) {
            ++*count;
            if (old == MAX_CONNS || c->conns[i].deadline_ms < c->conns[old].deadline_ms)
                old = i;
        }
    return old;
}

/* Room for one more held connection: a stranger's held longest goes
 * (false: none, every slot is the tree's). */
static bool make_slot(collector *c)
{
    if (c->nconns < MAX_CONNS)
        return true;
    size_t n, old = oldest_stranger(c, 0, &n);
    if (old == MAX_CONNS)
        return false;
    close_conn(c, old);
    return true;
}

/* A stranger's new connection held: its peer's oldest goes past
 * PER_PEER, the strangers' oldest past STRANGER_CONNS (a new connection
 * is the likeliest to carry a packet: an idle holder's are old). */
static void limit_strangers(collector *c, pid_t pid)
{
    size_t n, old = oldest_stranger(c, pid, &n);
    if (n > PER_PEER)
        close_conn(c, old);
    old = oldest_stranger(c, 0, &n);
    if (n > STRANGER_CONNS)
        close_conn(c, old);
}

/* Empties the backlog (at most 4096 a call, to go on serving): each
 * connection's packet read at once when it is there, else the connection
 * held within the limits above. */
static void accept_all(collector *c, int lfd)
{
    for (int n = 0; n < 4096; n++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || !make_slot(c)) {
            close(fd);
            c->refused++;
            continue;
        }
        bool known = mpt_cprocs_known(&c->procs, cr.pid);
        size_t k = c->nconns++;
        c->conns[k] = (conn){.fd = fd,
                             .pid = cr.pid,
                             .known = known,
                             .deadline_ms = mono_ms() + (known ? CONN_MS : STRANGER_MS)};
        if (!one(c, k) && !known)
            limit_strangers(c, cr.pid);
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

/* Packets without the token and connections closed without a packet,
 * counted since they were last said: once at the command's end, once at
 * the collector's (never a line each). */
static void say_refusals(collector *c)
{
    if (c->bad == c->said_bad && c->refused == c->said_refused)
        return;
    unsigned bad = c->bad - c->said_bad, refused = c->refused - c->said_refused;
    say(c,
        "mimprof: collector: %u packet%s not understood (no token), %u connection%s closed "
        "without a packet (idle past %d ms, or over the limits of peers outside the tree)\n",
        bad, bad == 1 ? "" : "s", refused, refused == 1 ? "" : "s", STRANGER_MS);
    c->said_bad = c->bad;
    c->said_refused = c->refused;
}

/* What the collector has done, when there is something to say. With
 * `end`, the uploads are flushed and stopped. */
static void summary(collector *c, bool end)
{
    if (end && c->wins != NULL)
        mpt_cwin_flush(c->wins, 0, true);
    say_refusals(c);
    const mpt_store *st = &c->store;
    if ((st->removed > 0 && !c->o->quiet) || st->failed > 0) {
        char lostp[700] = "", room[120] = "", up[80] = "";
        if (st->failed > 0)
            snprintf(lostp, sizeof lostp, ", %u lost (%s)", st->failed, c->lost_why);
        if (st->roomed > 0)
            snprintf(room, sizeof room, "; %u of them to make room on a full disk", st->roomed);
        if (c->uploads > 0)
            snprintf(up, sizeof up, ", %u handed to the uploads", c->uploads);
        say(c,
            "mimprof: collector: %u report%s written%s%s, %u older one%s removed (keep %u per "
            "process, %llu MiB in all%s)\n",
            st->written, st->written == 1 ? "" : "s", up, lostp, st->removed,
            st->removed == 1 ? "" : "s", c->o->keep, (unsigned long long)(c->o->keep_bytes >> 20),
            room);
    }
    if (c->pyro != NULL) {
        char line[1200];
        mpt_cpyro_flush(c->pyro, 0, true);
        /* The last uploads may take the exit deadline (a server that does
         * not answer): mimprof run waits for them, so it says why. */
        uint64_t left = end ? mpt_cpyro_settle(c->pyro, 2000) : 0;
        if (left > 0 && !c->o->quiet) {
            snprintf(line, sizeof line,
                     "mimprof: collector: %llu upload%s of the last reports not delivered yet; "
                     "trying for up to %llu s more (MIMPROF_PYROSCOPE_EXIT_DEADLINE)\n",
                     (unsigned long long)left, left == 1 ? "" : "s",
                     (unsigned long long)(mpt_cpyro_exit_deadline_ms() / 1000));
            out(c, line, strlen(line));
        }
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
        if (now >= c->conns[k].deadline_ms)
            close_conn(c, k);
}

int mpt_collector_main(int lfd, int notify, int ctl, const mpt_coll_opts *o)
{
    static collector c; /* large (its connections): not on the stack */
    c = (collector){.o = o, .notify = notify, .log = -1};
    mpt_store_init(&c.store, o);
    c.procs.ended = store_ended;
    c.procs.ended_ctx = &c.store;
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
    if (o->dir != NULL)
        c.wins = mpt_cwin_new(o->period_ms, window_out, &c);
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
        pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = ctl, .events = POLLIN};
        for (size_t k = 0; k < c.nconns; k++)
            pf[FIXED + k] = (struct pollfd){.fd = c.conns[k].fd, .events = POLLIN};
        size_t nconns = c.nconns;
        size_t nprocs = mpt_cprocs_pollfds(&c.procs, pf + FIXED + nconns, pfcap - FIXED - nconns);
        int64_t due = c.pyro != NULL ? mpt_cpyro_due(c.pyro) : 0;
        int64_t wdue = c.wins != NULL ? mpt_cwin_due(c.wins) : 0;
        if (wdue != 0 && (due == 0 || wdue < due))
            due = wdue;
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
        if (c.wins != NULL)
            mpt_cwin_flush(c.wins, now_ns(), false);
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
    say_refusals(&c);

    mpt_cpyro_free(c.pyro);
    mpt_csyms_free(c.syms);
    mpt_cwin_free(c.wins);
    mpt_store_free(&c.store);
    c.procs.ended = NULL; /* the store is gone */
    mpt_cprocs_free(&c.procs);
    while (c.nconns > 0)
        close(c.conns[--c.nconns].fd);
    if (c.log >= 0)
        close(c.log);
    if (c.notify >= 0)
        close(c.notify);
    return 0;
}
