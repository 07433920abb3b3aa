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
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <mimprof/profiling.h>

#include "arena.h"
#include "control.h"
#include "cumul.h"
#include "owned.h"
#include "proto.h"

enum { MAX_SECONDS = 60 };

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

/* ?seconds=N (1..MAX_SECONDS) in `q` (the query, NUL-terminated): N, 0
 * when absent, -1 when malformed. debug=N other than 0 is -2 (Go's text
 * formats are not served). */
static long query_seconds(const char *q)
{
    long seconds = 0;
    while (q != NULL && *q != '\0') {
        const char *amp = strchr(q, '&');
        size_t n = amp != NULL ? (size_t)(amp - q) : strlen(q);
        if (n > 8 && memcmp(q, "seconds=", 8) == 0) {
            char *end;
            seconds = strtol(q + 8, &end, 10);
            if (end != q + n || seconds < 1 || seconds > MAX_SECONDS)
                return -1;
        } else if (n > 6 && memcmp(q, "debug=", 6) == 0 && !(n == 7 && q[6] == '0')) {
            return -2;
        }
        q = amp != NULL ? amp + 1 : NULL;
    }
    return seconds;
}

static void route(mpc_conn *c, bool head_only, char *target)
{
    char *q = strchr(target, '?');
    if (q != NULL)
        *q++ = '\0';
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
    long seconds = query_seconds(q);
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

/* The end of the header block, or NULL. */
static const char *headers_end(const char *p, size_t n)
{
    const char *e = memmem(p, n, "\r\n\r\n", 4);
    const char *f = memmem(p, n, "\n\n", 2);
    return e == NULL ? f : f == NULL || e < f ? e : f;
}

/* The value of the Content-Length header in the `n` header bytes at
 * `p`: -1 when absent, -2 when malformed. */
static long content_length(const char *p, size_t n)
{
    static const char KEY[] = "\ncontent-length:";
    for (size_t i = 0; i + sizeof KEY - 1 <= n; i++) {
        if (strncasecmp(p + i, KEY, sizeof KEY - 1) != 0)
            continue;
        char num[24];
        size_t j = i + sizeof KEY - 1, k = 0;
        while (j < n && p[j] == ' ')
            j++;
        while (j < n && k + 1 < sizeof num && p[j] >= '0' && p[j] <= '9')
            num[k++] = p[j++];
        num[k] = '\0';
        return k == 0 || k > 9 ? -2 : atol(num);
    }
    return -1;
}

/* /debug/pprof/symbol: GET at once; POST once its body is in (at most
 * what the connection keeps). false: waiting for more of the body. */
static bool symbol_input(mpc_conn *c, bool get, bool head, bool post)
{
    if (!get && !post) {
        answer_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD, POST\r\n",
                    "mimprof: only GET, HEAD and POST");
        return true;
    }
    const char *end = headers_end(c->in, c->in_len);
    size_t start = (size_t)(end - c->in) + (end[0] == '\r' ? 4 : 2);
    long cl = post ? content_length(c->in, start) : 0;
    if (cl == -2 || (cl >= 0 && start + (size_t)cl > MPC_CONN_IN)) {
        answer_text(c, cl == -2 ? 400 : 413, cl == -2 ? "Bad Request" : "Payload Too Large", "",
                    "mimprof: the body wants a Content-Length of at most 16 KiB");
        return true;
    }
    size_t len = cl >= 0 ? (size_t)cl : c->in_len - start;
    if (c->in_len < start + len)
        return false;
    mpc_http_symbol(c, head, c->in + start, post ? len : 0);
    return true;
}

static bool http_input(mpc_conn *c)
{
    if (headers_end(c->in, c->in_len) == NULL) {
        if (c->in_len < MPC_CONN_IN)
            return false;
        answer_text(c, 431, "Request Header Fields Too Large", "",
                    "mimprof: request headers larger than 16 KiB");
        return true;
    }
    /* The request line: METHOD SP TARGET SP HTTP/1.x */
    size_t n = 0;
    while (n < c->in_len && c->in[n] != '\r' && c->in[n] != '\n')
        n++;
    char line[2048];
    if (n >= sizeof line) {
        answer_text(c, 414, "URI Too Long", "", "mimprof: request line too long");
        return true;
    }
    memcpy(line, c->in, n);
    line[n] = '\0';
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || strchr(sp2 + 1, ' ') != NULL || sp1[1] != '/' ||
        strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || strlen(line) != n) {
        answer_text(c, 400, "Bad Request", "", "mimprof: malformed HTTP request");
        return true;
    }
    *sp1 = *sp2 = '\0';
    bool get = strcmp(line, "GET") == 0, head = strcmp(line, "HEAD") == 0;
    if (strncmp(sp1 + 1, "/debug/pprof/symbol", 19) == 0 && (sp1[20] == '\0' || sp1[20] == '?'))
        return symbol_input(c, get || head, head, strcmp(line, "POST") == 0);
    if (!get && !head) {
        answer_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
                    "mimprof: only GET and HEAD");
        return true;
    }
    route(c, head, sp1 + 1);
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
