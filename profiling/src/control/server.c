/* SPDX-License-Identifier: MIT */
/* The process's control (<mimprof/profiling_control.h>; control.h for
 * the module map): its options, its sockets, its thread, fork, and the
 * public functions.
 *
 * One thread runs a poll() loop (conn.h) over the listening sockets (the
 * control socket, ctl.c; the HTTP endpoint, http.c), a wake-up pipe and
 * at most MPC_MAX_CONN connections -- or, with a host
 * (mp_prof_control_options::host), over the connections the host hands
 * over, with no listener and no pipe of its own -- every descriptor
 * identity-checked before use (mp_prof_fd_take, profiling.h). Every
 * socket is non-blocking: a connection reads its request, is answered
 * (built at once, on this thread), then written as the peer reads, and
 * closed when the answer is sent, on any error, or at its deadline.
 *
 * Memory: connection buffers are static or mmap()ed, the reports'
 * buffers come from the profiler (allocated under its recursion guard),
 * and the thread is excluded from sampling: nothing of it is sampled as
 * the program's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

#include "control.h"
#include "cumul.h"
#include "http.h"
#include "proto.h"

/* The handle: the state is the process's one control, below. */
struct mp_prof_control {
    int unused;
};

/* Every descriptor is an mp_prof_owned_fd (mp_prof_fd_take, profiling.h): the program may close
 * them all and reuse their numbers. Written by open, close and the fork
 * handler (g.lock; the fork child alone), read by the thread they
 * start and stop. */
static struct {
    pthread_mutex_t lock; /* open / close */
    bool open;
    bool atfork; /* the fork handler is registered */
    mp_prof_control handle;
    mp_prof_control_options opts;
    char http_spec[128]; /* opts.http points here */
    mp_prof_control_hooks hooks;
    bool have_hooks;
    const mp_prof_control_host *host;  /* opts.host: connections come from it */
    mp_prof_owned_fd listen;           /* the control socket (none with a host) */
    mp_prof_owned_fd http;             /* the /debug/pprof listener */
    atomic_bool http_on;               /* reports feed cumul.h */
    char http_addr[96];                /* where it listens, for status */
    mp_prof_owned_fd wake_rd, wake_wr; /* a pipe: close wakes the thread */
    pthread_t thread;
    bool have_thread;
    atomic_bool stop;
    char name[108];
    size_t name_len;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .listen = {.fd = -1},
       .http = {.fd = -1},
       .wake_rd = {.fd = -1},
       .wake_wr = {.fd = -1}};

const mp_prof_control_hooks *mpc_ops(void) { return g.have_hooks ? &g.hooks : &mpc_session_hooks; }

const mp_prof_control_options *mpc_options(void) { return &g.opts; }

const char *mpc_http_name(void) { return g.http.fd >= 0 ? g.http_addr : NULL; }

void mpc_say(bool always, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if (g.hooks.log != NULL) {
        g.hooks.log(g.hooks.ctx, buf);
    } else if (always || !g.opts.quiet) {
        ssize_t w = write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
}

static int64_t real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- the thread ------------------------------------------------------- */

static void *ctl_main(void *arg)
{
    (void)arg;
    /* What this thread allocates (the image writer's, protobuf-c's in the
     * profiler) is the profiler's, never sampled as the program's. */
    mp_prof_thread_exclude();
    if (g.host != NULL) {
        mpc_loop_run_host(g.host, &mpc_ctl_proto, &g.stop);
        return NULL;
    }
    mpc_loop_listener ls[2];
    int n = 0;
    if (g.listen.fd >= 0)
        ls[n++] = (mpc_loop_listener){.own = &g.listen, .proto = &mpc_ctl_proto};
    if (g.http.fd >= 0)
        ls[n++] = (mpc_loop_listener){.own = &g.http, .proto = &mpc_http_proto};
    mpc_loop_run(ls, n, &g.wake_rd, &g.stop);
    return NULL;
}

static int bind_socket(void)
{
    g.name_len = mpc_ctl_name((long)getpid(), g.name, sizeof g.name);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    fd = mp_prof_fd_high(fd);
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
    return mp_prof_fd_take(&g.listen, fd) ? 0 : -1;
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

/* Closes every descriptor (when still ours); the thread is gone. */
static void close_all(void)
{
    atomic_store(&g.http_on, false);
    mp_prof_fd_close(&g.listen);
    mp_prof_fd_close(&g.http);
    mp_prof_fd_close(&g.wake_rd);
    mp_prof_fd_close(&g.wake_wr);
    mpc_loop_after_fork(); /* connections a stopped loop left: none; a fork child's */
}

/* The sockets asked for and the thread (signals blocked from birth). */
static mp_prof_status serve(bool ctl, const char *http, bool wildcard, char *why, size_t whylen)
{
    if (ctl && g.host == NULL && bind_socket() != 0) {
        snprintf(why, whylen, "ctl: no control socket @%s: %s", g.name + 1, strerror(errno));
        close_all();
        return MP_PROF_E_IO;
    }
    if (http != NULL) {
        char err[512];
        int fd = mpc_http_listen(http, wildcard, err, sizeof err);
        if (fd < 0 || !mp_prof_fd_take(&g.http, fd)) {
            snprintf(why, whylen, "http: %s", fd < 0 ? err : "the socket cannot be identified");
            close_all();
            return MP_PROF_E_IO;
        }
        http_name();
    }
    /* A pipe, not an eventfd: every eventfd shares one inode, so a
     * program's own could not be told from ours (mp_prof_fd_take,
     * profiling.h). With a host, none: the host wakes the thread. */
    int p[2];
    if (g.host == NULL && pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
        mp_prof_fd_take(&g.wake_rd, mp_prof_fd_high(p[0]));
        mp_prof_fd_take(&g.wake_wr, mp_prof_fd_high(p[1]));
    }
    if (g.http.fd >= 0) {
        mpc_cumul_reset(real_ns()); /* before any report can be fed */
        atomic_store(&g.http_on, true);
    }
    atomic_store(&g.stop, false);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    bool woken = g.host != NULL || (g.wake_rd.fd >= 0 && g.wake_wr.fd >= 0);
    int e = woken ? pthread_create(&g.thread, NULL, ctl_main, NULL) : errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    g.have_thread = e == 0;
    if (!g.have_thread) {
        snprintf(why, whylen, "no control thread: %s", strerror(e));
        close_all();
        return MP_PROF_E_NOMEM;
    }
    return MP_PROF_OK;
}

/* Ends the thread (woken by the host, or through the pipe, else within
 * a second). */
static void stop_thread(void)
{
    if (!g.have_thread)
        return;
    atomic_store(&g.stop, true);
    if (g.host != NULL) {
        g.host->wake(g.host->ctx);
    } else if (mp_prof_fd_check(&g.wake_wr)) {
        ssize_t w = write(g.wake_wr.fd, "x", 1);
        (void)w;
    }
    pthread_join(g.thread, NULL);
    g.have_thread = false;
}

/* In a forked child (single-threaded), after the host's handlers: the
 * parent's thread does not exist here and its descriptors are copies
 * (closing them leaves the parent's sockets alone); the child serves its
 * own control socket, or nothing. */
static void after_fork_child(void)
{
    pthread_mutex_init(&g.lock, NULL);
    if (!g.open)
        return;
    g.have_thread = false;
    close_all(); /* the port is the parent's */
    mpc_ctl_after_fork();
    if (!g.have_hooks)
        mpc_session_after_fork();
    bool child_serves = g.have_hooks && g.hooks.fork_child != NULL ? g.hooks.fork_child(g.hooks.ctx)
                                                                   : g.opts.serve_forked_children;
    char why[512];
    if (child_serves && g.opts.ctl && serve(true, NULL, false, why, sizeof why) != MP_PROF_OK)
        mpc_say(false, "mimprof: pid %ld: %s\n", (long)getpid(), why);
}

/* ---- the public functions --------------------------------------------- */

void mp_prof_control_options_init(mp_prof_control_options *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->ctl = true;
    mp_prof_config_init(&o->config);
}

static bool hooks_complete(const mp_prof_control_hooks *h)
{
    return h->state != NULL && h->start != NULL && h->stop != NULL && h->report != NULL &&
           h->image != NULL && h->set_interval != NULL;
}

mp_prof_status mp_prof_control_open(const mp_prof_control_options *o,
                                    const mp_prof_control_hooks *hooks, mp_prof_control **out,
                                    char *why, size_t whylen)
{
    char ignored[1];
    if (why == NULL || whylen == 0) {
        why = ignored;
        whylen = sizeof ignored;
    }
    why[0] = '\0';
    if (o == NULL || out == NULL || (!o->ctl && o->http == NULL)) {
        snprintf(why, whylen, "%s",
                 o == NULL || out == NULL ? "NULL argument" : "neither the ctl socket nor http");
        return MP_PROF_E_INVALID_CONFIG;
    }
    if (o->host != NULL && (o->host->take == NULL || o->host->wake == NULL || o->http != NULL)) {
        snprintf(why, whylen, "%s",
                 o->http != NULL ? "host: the control's connections come from a host, http "
                                   "cannot be served with one"
                                 : "host: take and wake are both needed");
        return MP_PROF_E_INVALID_CONFIG;
    }
    if (hooks != NULL && !hooks_complete(hooks)) {
        snprintf(why, whylen,
                 "hooks: state, start, stop, report, image and set_interval are "
                 "all needed");
        return MP_PROF_E_INVALID_CONFIG;
    }
    if (o->http != NULL &&
        (strlen(o->http) >= sizeof g.http_spec ||
         mp_prof_control_check_http(o->http, o->http_wildcard, why, whylen) != MP_PROF_OK)) {
        if (why[0] == '\0')
            snprintf(why, whylen, "http: the address is longer than %zu bytes",
                     sizeof g.http_spec - 1);
        return MP_PROF_E_INVALID_CONFIG;
    }
    pthread_mutex_lock(&g.lock);
    if (g.open) {
        pthread_mutex_unlock(&g.lock);
        snprintf(why, whylen, "a control is already open in this process");
        return MP_PROF_E_BUSY;
    }
    g.opts = *o;
    g.host = o->ctl ? o->host : NULL; /* the pointer only: the host outlives the control */
    if (o->http != NULL) {
        snprintf(g.http_spec, sizeof g.http_spec, "%s", o->http);
        g.opts.http = g.http_spec;
    }
    g.have_hooks = hooks != NULL;
    if (hooks != NULL)
        g.hooks = *hooks;
    else
        memset(&g.hooks, 0, sizeof g.hooks);
    if (!g.have_hooks)
        mpc_session_init(&g.opts.config);
    mp_prof_status st = serve(g.opts.ctl, g.opts.http, g.opts.http_wildcard, why, whylen);
    if (st == MP_PROF_OK) {
        g.open = true;
        if (!g.atfork)
            g.atfork = pthread_atfork(NULL, NULL, after_fork_child) == 0;
        *out = &g.handle;
    } else {
        memset(&g.hooks, 0, sizeof g.hooks);
        g.have_hooks = false;
    }
    pthread_mutex_unlock(&g.lock);
    return st;
}

void mp_prof_control_close(mp_prof_control *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&g.lock);
    if (g.open) {
        stop_thread();
        close_all();
        if (!g.have_hooks)
            mpc_session_end();
        g.open = false;
        g.host = NULL;
        g.have_hooks = false;
        memset(&g.hooks, 0, sizeof g.hooks);
    }
    pthread_mutex_unlock(&g.lock);
}

const char *mp_prof_control_http_address(const mp_prof_control *c)
{
    return c != NULL ? mpc_http_name() : NULL;
}

void mpc_http_session_started(void)
{
    if (atomic_load(&g.http_on))
        mpc_cumul_reset(real_ns()); /* Go's alloc_*: since the session started */
}

mp_prof_status mpc_http_feed(const uint8_t *pprof, size_t len)
{
    if (!atomic_load(&g.http_on))
        return MP_PROF_OK;
    if (pprof == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    return mpc_cumul_add(pprof, len) == 0 ? MP_PROF_OK : MP_PROF_E_INVALID_CONFIG;
}

void mp_prof_control_session_started(mp_prof_control *c)
{
    if (c != NULL)
        mpc_http_session_started();
}

mp_prof_status mp_prof_control_feed(mp_prof_control *c, const uint8_t *pprof, size_t len)
{
    return c != NULL ? mpc_http_feed(pprof, len) : MP_PROF_E_INVALID_CONFIG;
}

size_t mp_prof_control_socket_name(long pid, char *out, size_t cap)
{
    return out != NULL ? mpc_ctl_name(pid, out, cap) : 0;
}

mp_prof_status mp_prof_control_check_http(const char *spec, bool wildcard_ok, char *why,
                                          size_t whylen)
{
    struct sockaddr_storage ss;
    unsigned sslen;
    char ignored[1];
    if (why == NULL || whylen == 0) {
        why = ignored;
        whylen = sizeof ignored;
    }
    if (spec == NULL) {
        snprintf(why, whylen, "no address");
        return MP_PROF_E_INVALID_CONFIG;
    }
    return mpc_http_parse_addr(spec, wildcard_ok, &ss, &sslen, why, whylen) == 0
               ? MP_PROF_OK
               : MP_PROF_E_INVALID_CONFIG;
}
