/* SPDX-License-Identifier: MIT */
/* The HTTP endpoint (http.h): the listener, and the request handler run
 * by the control thread's loop (conn.h). */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <mimprof/profiling.h>

#include "arena.h"
#include "control.h"
#include "cumul.h"
#include "http_parse.h"
#include "proto.h"

/* ---- the address ------------------------------------------------------ */

int mpc_http_listen(const char *spec, bool wildcard_ok, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    unsigned sslen;
    if (mpc_http_parse_addr(spec, wildcard_ok, &ss, &sslen, why, whylen) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    fd = mp_prof_fd_high(fd);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 || listen(fd, 16) != 0) {
        snprintf(why, whylen, "cannot listen on %s: %s", spec, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- answers ---------------------------------------------------------- */

static void http_date(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* An error as Go's http.Error writes it: one line of text/plain. */
static void answer_text(mpc_conn *c, int code, const char *reason, const char *extra,
                        const char *msg)
{
    char date[64];
    http_date(date, sizeof date);
    mpc_conn_head(c,
                  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                  "X-Content-Type-Options: nosniff\r\nDate: %s\r\n%sContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n%s\n",
                  code, reason, date, extra, strlen(msg) + 1, msg);
}

void mpc_http_text(mpc_conn *c, int code, const char *reason, const char *msg)
{
    answer_text(c, code, reason, "", msg);
}

void mpc_http_ok(mpc_conn *c, const char *content_type, size_t len)
{
    char date[64];
    http_date(date, sizeof date);
    mpc_conn_head(c,
                  "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nX-Content-Type-Options: nosniff\r\n"
                  "Date: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                  content_type, date, len);
}

static const char INDEX[] =
    "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/<br>\n<br>\n"
    "Types of profiles available (mimprof heap profiler):\n<ul>\n"
    "<li><a href=\"allocs\">allocs</a>: a sampling of all past memory allocations "
    "(since the profiling session started)</li>\n"
    "<li><a href=\"heap\">heap</a>: a sampling of memory allocations of live objects</li>\n"
    "</ul>\n<p>?seconds=N: the difference over the next N seconds (at most 60).</p>\n"
    "</body>\n</html>\n";

static void answer_index(mpc_conn *c, bool head_only)
{
    char date[64];
    http_date(date, sizeof date);
    mpc_conn_head(c,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                  "X-Content-Type-Options: nosniff\r\nDate: %s\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n",
                  date, sizeof INDEX - 1);
    if (!head_only)
        mpc_conn_body(c, (void *)INDEX, sizeof INDEX - 1, NULL);
}

/* zlib's allocator: mmap, so nothing here is sampled as the program's. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    size_t n = (size_t)items * size + 16;
    char *p = mpc_map(n);
    if (p == NULL)
        return Z_NULL;
    *(size_t *)p = n;
    return p + 16;
}

static void z_free(voidpf opaque, voidpf address)
{
    (void)opaque;
    if (address != Z_NULL)
        mpc_unmap((char *)address - 16, *(size_t *)((char *)address - 16));
}

/* A gzip body lives in a mapping after a header that holds the
 * mapping's size. */
enum { GZ_HDR = 64 };

static void gz_release(void *body, size_t len)
{
    (void)len;
    char *m = (char *)body - GZ_HDR;
    mpc_unmap(m, *(size_t *)m);
}

/* gzip of buf, in one deflate call over a buffer of deflateBound(); the
 * body (release with gz_release), or NULL. */
static uint8_t *gzip_mem(const uint8_t *buf, size_t len, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    if (len > UINT32_MAX ||
        deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t bound = deflateBound(&zs, (uLong)len) + 64;
    char *m = mpc_map(GZ_HDR + bound);
    uint8_t *body = NULL;
    if (m != NULL) {
        *(size_t *)m = GZ_HDR + bound;
        zs.next_in = (Bytef *)(uintptr_t)buf;
        zs.avail_in = (uInt)len;
        zs.next_out = (Bytef *)m + GZ_HDR;
        zs.avail_out = (uInt)bound;
        if (deflate(&zs, Z_FINISH) == Z_STREAM_END) {
            body = (uint8_t *)m + GZ_HDR;
            *out_len = bound - zs.avail_out;
        } else {
            mpc_unmap(m, GZ_HDR + bound);
        }
    }
    deflateEnd(&zs);
    return body;
}

/* What the profile request asks for, kept on the connection while a
 * ?seconds=N request waits. */
typedef struct {
    const char *name; /* heap | allocs */
    bool head_only;
    bool waiting;         /* the mark is taken: the answer is at the timer */
    mpc_cumul_mark since; /* ?seconds=N: the values at the request */
    /* filled by encode_locked under the report serialisation (control.h) */
    uint8_t *pb;
    size_t pb_len;
    int rc;
} prof_req;

static int64_t real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void encode_locked(void *ctx)
{
    prof_req *r = ctx;
    const char *dflt = strcmp(r->name, "allocs") == 0 ? "alloc_space" : "inuse_space";
    if (!r->waiting && r->since.vals == NULL && r->rc == 1) /* the mark of ?seconds=N */
        r->rc = mpc_cumul_mark_take(&r->since, real_ns());
    else
        r->rc =
            mpc_cumul_encode(dflt, real_ns(), r->waiting ? &r->since : NULL, &r->pb, &r->pb_len);
}

/* Whether a session runs. */
static bool running(void)
{
    mp_prof_control_state st;
    memset(&st, 0, sizeof st);
    mpc_ops()->state(mpc_ops()->ctx, &st);
    return st.running;
}

/* Takes a report (merged into the cumulative profile) and runs
 * encode_locked; 503 when dormant (unless the options start a session:
 * http_starts), 500 when it failed. */
static bool take(mpc_conn *c, prof_req *r)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char why[512] = "";
    const mp_prof_control_hooks *ops = mpc_ops();
    if (mpc_options()->http_starts && !running())
        (void)ops->start(ops->ctx, 0, -1, why, sizeof why); /* a failure is the 500 below */
    if (ops->report(ops->ctx, &buf, &len, encode_locked, r, why, sizeof why) != MP_PROF_OK) {
        char msg[600];
        if (!running()) {
            snprintf(msg, sizeof msg,
                     "mimprof: pid %ld is dormant: no heap profile until a session is started "
                     "(mimprof ctl %ld start)",
                     (long)getpid(), (long)getpid());
            answer_text(c, 503, "Service Unavailable", "Retry-After: 60\r\n", msg);
        } else {
            snprintf(msg, sizeof msg, "mimprof: report failed: %s", why);
            answer_text(c, 500, "Internal Server Error", "", msg);
        }
        return false;
    }
    mp_prof_buffer_free(buf);
    if (r->rc != 0) {
        answer_text(c, 500, "Internal Server Error", "",
                    "mimprof: the profile could not be encoded (out of memory?)");
        return false;
    }
    return true;
}

static void answer_profile(mpc_conn *c, prof_req *r)
{
    size_t gz_len = 0;
    uint8_t *gz = gzip_mem(r->pb, r->pb_len, &gz_len);
    mpc_unmap(r->pb, r->pb_len);
    r->pb = NULL;
    if (gz == NULL) {
        answer_text(c, 500, "Internal Server Error", "", "mimprof: gzip failed");
        return;
    }
    char date[64];
    http_date(date, sizeof date);
    mpc_conn_head(c,
                  "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                  "Content-Disposition: attachment; filename=\"%s%s\"\r\n"
                  "X-Content-Type-Options: nosniff\r\nDate: %s\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n",
                  r->name, r->waiting ? "-delta" : "", date, gz_len);
    if (r->head_only)
        gz_release(gz, gz_len);
    else
        mpc_conn_body(c, gz, gz_len, gz_release);
}

/* ---- requests --------------------------------------------------------- */

static void req_release(mpc_conn *c)
{
    prof_req *r = c->user;
    if (r == NULL)
        return;
    mpc_cumul_mark_free(&r->since);
    if (r->pb != NULL)
        mpc_unmap(r->pb, r->pb_len);
    mpc_unmap(r, sizeof *r);
    c->user = NULL;
}

/* The reason phrase of a refusal mpc_http_parse gives. */
static const char *reason_of(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    default:
        return "Error";
    }
}

static void route(mpc_conn *c, bool head_only, const char *target, const char *q)
{
    if (strcmp(target, "/debug/pprof/") == 0 || strcmp(target, "/debug/pprof") == 0) {
        answer_index(c, head_only);
        return;
    }
    const char *name = strcmp(target, "/debug/pprof/heap") == 0     ? "heap"
                       : strcmp(target, "/debug/pprof/allocs") == 0 ? "allocs"
                                                                    : NULL;
    if (name == NULL) {
        answer_text(c, 404, "Not Found", "", "404 page not found");
        return;
    }
    long seconds = mpc_http_query_seconds(q);
    if (seconds < 0) {
        answer_text(c, 400, "Bad Request", "",
                    seconds == -2 ? "mimprof: only the binary profile is served (debug=0)"
                                  : "mimprof: seconds wants a whole number of seconds, 1..60");
        return;
    }
    prof_req *r = mpc_map(sizeof *r);
    if (r == NULL) {
        answer_text(c, 503, "Service Unavailable", "", "mimprof: out of memory");
        return;
    }
    memset(r, 0, sizeof *r);
    r->name = name;
    r->head_only = head_only;
    c->user = r;
    if (seconds == 0) {
        if (take(c, r))
            answer_profile(c, r);
        return;
    }
    r->rc = 1; /* encode_locked: take the mark */
    if (!take(c, r))
        return;
    /* The answer comes at the timer; the connection waits without
     * reading (one request per connection) and may take that long. */
    r->waiting = true;
    c->answering = true;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    c->timer_ms = (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000 + seconds * 1000;
    c->deadline_ms = c->timer_ms + MPC_CONN_DEADLINE_MS;
}

static void http_timer(mpc_conn *c)
{
    prof_req *r = c->user;
    if (take(c, r))
        answer_profile(c, r);
}

static bool http_input(mpc_conn *c)
{
    mpc_http_req r;
    if (!mpc_http_parse(c->in, c->in_len, MPC_CONN_IN, &r))
        return false;
    switch (r.status) {
    case 0:
        break;
    case 405:
        answer_text(c, 405, "Method Not Allowed",
                    r.symbol ? "Allow: GET, HEAD, POST\r\n" : "Allow: GET, HEAD\r\n", r.why);
        return true;
    default:
        answer_text(c, r.status, reason_of(r.status), "", r.why);
        return true;
    }
    bool head = r.method == MPC_HTTP_HEAD;
    if (r.symbol)
        mpc_http_symbol(c, head, c->in + r.body_off, r.body_len);
    else
        route(c, head, r.target, r.query);
    return true;
}

const mpc_conn_proto mpc_http_proto = {
    .max_in = MPC_CONN_IN,
    .busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: 30\r\nConnection: close\r\n\r\nmimprof: too many connections\n",
    .on_input = http_input,
    .on_timer = http_timer,
    .on_close = req_release,
};
