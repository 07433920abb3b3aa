/* SPDX-License-Identifier: MIT */
/* The runtime's control socket and its thread (rt_ctl.h for the
 * contract, ctl_proto.h for the protocol).
 *
 * One thread runs a poll() loop over the listening socket, a wake-up
 * pipe and at most MPT_CTL_MAX_CONN connections, every descriptor
 * identity-checked before use (rt_owned.h). Every socket is
 * non-blocking: a connection reads its request line, is answered
 * (the answer is built at once, on this thread), then writes as the peer
 * reads, and is closed when the answer is sent, on any error, or at its
 * deadline. Other servers on the same loop (the HTTP endpoint, rt_http.h)
 * plug in as a second listener with their own request handler.
 *
 * Memory: connection buffers are static or mmap()ed, the reports'
 * buffers come from the profiler (allocated under its recursion guard):
 * nothing of this thread is sampled as the program's. */
#define _GNU_SOURCE
#include "rt_ctl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "ctl_proto.h"
#include "rt_common.h"
#include "rt_conn.h"
#include "rt_http.h"

/* Every descriptor is an mpt_owned (rt_owned.h): the program may close
 * them all and reuse their numbers. */
static struct {
    mpt_owned listen;           /* the control socket */
    mpt_owned http;             /* the /debug/pprof listener */
    char http_addr[96];         /* where it listens, for status */
    mpt_owned wake_rd, wake_wr; /* a pipe: mpt_ctl_stop wakes the thread */
    pthread_t thread;
    bool have_thread;
    atomic_bool stop;
    bool quiet;
    bool told_refused; /* another user's connection was logged */
    char name[108];
    size_t name_len;
} g = {.listen = {.fd = -1}, .http = {.fd = -1}, .wake_rd = {.fd = -1}, .wake_wr = {.fd = -1}};

/* ---- answers ---------------------------------------------------------- */

static void answer_error(mpt_conn *c, const char *why) { mpt_conn_head(c, "error: %s\n", why); }

static void answer_status(mpt_conn *c)
{
    mpt_rt_state st;
    mpt_rt_get_state(&st);
    mp_prof_stats ps;
    mp_prof_diagnostics(&ps);
    char last[64] = "none";
    if (st.last_report_ns != 0) {
        time_t t = (time_t)(st.last_report_ns / 1000000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    char every[32];
    if (st.every_ms == 0)
        snprintf(every, sizeof every, "0 (on request and at exit)");
    else
        snprintf(every, sizeof every, "%llums", (unsigned long long)st.every_ms);
    char upload[256] = "off";
    if (st.uploading)
        snprintf(upload, sizeof upload, "on (service_name=%s): %llu uploaded, %llu lost",
                 st.service, (unsigned long long)st.uploaded, (unsigned long long)st.upload_lost);
    unsigned long long drops = ps.dropped_registration + ps.dropped_teardown +
                               ps.dropped_overflow_full + ps.dropped_live_table_full;
    mpt_conn_head(c,
                  "ok\npid: %ld\nstate: %s\ninterval: %llu\nnext interval: %llu\nevery: %s\n"
                  "samples: %llu\nlive samples: %llu\ndrops: %llu\nreports: %u\n"
                  "last report: %s\noutput: %s\nupload: %s\nhttp: %s\n",
                  (long)getpid(), st.running ? "running" : "dormant",
                  (unsigned long long)st.interval, (unsigned long long)st.next_interval, every,
                  (unsigned long long)ps.samples_taken, (unsigned long long)ps.live_samples, drops,
                  st.reports, last, st.output[0] != '\0' ? st.output : "none", upload,
                  g.http.fd >= 0 ? g.http_addr : "off");
}

static void free_report(void *p, size_t len)
{
    (void)len;
    mp_prof_buffer_free(p);
}

static void unmap(void *p, size_t len) { munmap(p, len); }

/* A heap image: written into a private directory (the writer replaces
 * files by rename, so it needs one), mapped, removed, and sent. */
static void answer_image(mpt_conn *c)
{
    char why[512];
    char dir[] = "/tmp/mimprof-ctl.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        snprintf(why, sizeof why, "no private directory in /tmp: %s", strerror(errno));
        answer_error(c, why);
        return;
    }
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/heap.mpimg", dir);
    if (mpt_rt_ctl_image(path, why, sizeof why) != 0) {
        rmdir(dir);
        answer_error(c, why);
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    void *map = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0)
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0)
        close(fd);
    unlink(path);
    rmdir(dir);
    if (map == MAP_FAILED) {
        answer_error(c, "the image was written but cannot be read back");
        return;
    }
    mpt_conn_head(c, "ok %llu\n", (unsigned long long)sb.st_size);
    mpt_conn_body(c, map, (size_t)sb.st_size, unmap);
}

/* One request line (without its '\n'). */
static void answer(mpt_conn *c, const char *line, size_t len)
{
    mpt_ctl_req req;
    char why[512];
    if (mpt_ctl_parse(line, len, &req, why, sizeof why) != 0) {
        answer_error(c, why);
        return;
    }
    switch (req.cmd) {
    case MPT_CTL_STATUS:
        answer_status(c);
        return;
    case MPT_CTL_START:
        if (mpt_rt_ctl_start(req.interval, req.has_every ? (int64_t)req.every_ms : -1, why,
                             sizeof why) != 0)
            answer_error(c, why);
        else
            answer_status(c);
        return;
    case MPT_CTL_STOP:
        if (mpt_rt_ctl_stop(why, sizeof why) != 0)
            answer_error(c, why);
        else
            answer_status(c);
        return;
    case MPT_CTL_REPORT: {
        uint8_t *buf = NULL;
        size_t blen = 0;
        if (mpt_rt_ctl_report(&buf, &blen, NULL, NULL, why, sizeof why) != 0) {
            answer_error(c, why);
            return;
        }
        mpt_conn_head(c, "ok %zu\n", blen);
        mpt_conn_body(c, buf, blen, free_report);
        return;
    }
    case MPT_CTL_IMAGE:
        answer_image(c);
        return;
    case MPT_CTL_SET:
        mpt_rt_ctl_set_interval(req.interval);
        answer_status(c);
        return;
    }
}

/* The ctl protocol on a connection: answers once a full line is in. */
static bool ctl_input(mpt_conn *c)
{
    const char *nl = memchr(c->in, '\n', c->in_len);
    if (nl == NULL) {
        if (c->in_len > MPT_CTL_MAX_LINE) {
            answer_error(c, "request longer than 512 bytes");
            return true;
        }
        return false;
    }
    answer(c, c->in, (size_t)(nl - c->in));
    return true;
}

/* Only this process's user, and root. */
static bool ctl_accept(mpt_conn *c)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        answer_error(c, "cannot identify the peer");
        return false;
    }
    uid_t me = geteuid();
    if (cr.uid == me || cr.uid == 0)
        return true;
    if (!g.told_refused) {
        g.told_refused = true;
        mpt_rt_say(false,
                   "mimprof: ctl: refused a connection from uid %ld (pid %ld): only uid %ld "
                   "and root may control pid %ld (logged once)\n",
                   (long)cr.uid, (long)cr.pid, (long)me, (long)getpid());
    }
    answer_error(c, "permission denied: not this process's user");
    return false;
}

static const mpt_conn_proto CTL_PROTO = {
    .max_in = MPT_CTL_MAX_LINE + 1,
    .on_accept = ctl_accept,
    .on_input = ctl_input,
};

/* ---- the thread ------------------------------------------------------- */

static void *ctl_main(void *arg)
{
    (void)arg;
    /* What this thread allocates (the image writer's, protobuf-c's in the
     * profiler) is the profiler's, never sampled as the program's. */
    mp_prof_thread_exclude();
    mpt_loop_listener ls[2];
    int n = 0;
    if (g.listen.fd >= 0)
        ls[n++] = (mpt_loop_listener){.own = &g.listen, .proto = &CTL_PROTO};
    if (g.http.fd >= 0)
        ls[n++] = (mpt_loop_listener){.own = &g.http, .proto = &mpt_http_proto};
    mpt_loop_run(ls, n, &g.wake_rd, &g.stop);
    return NULL;
}

static int bind_socket(void)
{
    g.name_len = mpt_ctl_name((long)getpid(), g.name, sizeof g.name);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    fd = mpt_rt_fd_high(fd);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, g.name, g.name_len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + g.name_len);
    if (bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 16) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return mpt_owned_take(&g.listen, fd) ? 0 : -1;
}

/* Where the HTTP endpoint listens, as "host:port" (the port bound). */
static void http_name(void)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[64] = "?";
    unsigned port = 0;
    if (getsockname(g.http.fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            host[0] = '[';
            inet_ntop(AF_INET6, &a->sin6_addr, host + 1, sizeof host - 2);
            strcat(host, "]");
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            port = ntohs(a->sin_port);
        }
    }
    snprintf(g.http_addr, sizeof g.http_addr, "%s:%u", host, port);
}

/* The sockets asked for and the thread (signals blocked from birth). */
static int serve(bool ctl, const char *http, bool wildcard)
{
    if (ctl && bind_socket() != 0)
        mpt_rt_say(g.quiet, "mimprof: ctl: no control socket @%s: %s\n", g.name + 1,
                   strerror(errno));
    if (http != NULL) {
        char why[512];
        int fd = mpt_http_listen(http, wildcard, why, sizeof why);
        if (fd < 0)
            mpt_rt_say(false, "mimprof: http: %s; not serving /debug/pprof\n", why);
        else if (mpt_owned_take(&g.http, fd))
            http_name();
    }
    if (g.listen.fd < 0 && g.http.fd < 0)
        return -1;
    /* A pipe, not an eventfd: every eventfd shares one inode, so a
     * program's own could not be told from ours (rt_owned.h). */
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
        mpt_owned_take(&g.wake_rd, mpt_rt_fd_high(p[0]));
        mpt_owned_take(&g.wake_wr, mpt_rt_fd_high(p[1]));
    }
    atomic_store(&g.stop, false);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    g.have_thread = g.wake_rd.fd >= 0 && g.wake_wr.fd >= 0 &&
                    pthread_create(&g.thread, NULL, ctl_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!g.have_thread) {
        mpt_rt_say(g.quiet, "mimprof: ctl: no control thread: %s\n", strerror(errno));
        mpt_ctl_after_fork(false); /* closes what was opened */
        return -1;
    }
    return 0;
}

int mpt_ctl_start(bool quiet, bool ctl, const char *http, bool http_wildcard)
{
    g.quiet = quiet;
    return serve(ctl, http, http_wildcard);
}

bool mpt_ctl_http_on(void) { return g.http.fd >= 0; }

void mpt_ctl_after_fork(bool serve_child)
{
    /* The parent's thread does not exist here; its descriptors are
     * copies (closing them leaves the parent's socket alone). */
    g.have_thread = false;
    mpt_owned_close(&g.listen);
    mpt_owned_close(&g.http); /* the port is the parent's */
    mpt_owned_close(&g.wake_rd);
    mpt_owned_close(&g.wake_wr);
    mpt_loop_after_fork();
    g.told_refused = false;
    if (serve_child)
        serve(true, NULL, false);
}

void mpt_ctl_stop(void)
{
    if (!g.have_thread)
        return;
    atomic_store(&g.stop, true);
    if (mpt_owned_check(&g.wake_wr)) { /* else the thread sees the stop within a second */
        ssize_t w = write(g.wake_wr.fd, "x", 1);
        (void)w;
    }
    pthread_join(g.thread, NULL);
    g.have_thread = false;
    mpt_ctl_after_fork(false);
}
