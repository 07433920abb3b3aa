/* SPDX-License-Identifier: MIT */
/* Reading an HTTP/1.x request (http_parse.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "http_parse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The end of the header block (its blank line) in `n` bytes, or NULL. */
static const char *headers_end(const char *p, size_t n)
{
    const char *e = memmem(p, n, "\r\n\r\n", 4);
    const char *f = memmem(p, n, "\n\n", 2);
    return e == NULL ? f : f == NULL || e < f ? e : f;
}

/* The value of the Content-Length header in the `n` header bytes at
 * `p`: -1 when absent, -2 when malformed (no digits, over 9 digits, or
 * anything but spaces after them on its line). */
static long content_length(const char *p, size_t n)
{
    static const char KEY[] = "\ncontent-length:";
    for (size_t i = 0; i + sizeof KEY - 1 <= n; i++) {
        if (strncasecmp(p + i, KEY, sizeof KEY - 1) != 0)
            continue;
        char num[16];
        size_t j = i + sizeof KEY - 1, k = 0;
        while (j < n && p[j] == ' ')
            j++;
        while (j < n && p[j] >= '0' && p[j] <= '9') {
            if (k + 1 >= sizeof num)
                return -2;
            num[k++] = p[j++];
        }
        while (j < n && p[j] == ' ')
            j++;
        if (k == 0 || k > 9 || (j < n && p[j] != '\r' && p[j] != '\n'))
            return -2;
        num[k] = '\0';
        return atol(num);
    }
    return -1;
}

static bool refuse(mpc_http_req *r, int status, const char *why)
{
    r->status = status;
    r->why = why;
    return true;
}

static mpc_http_method method_of(const char *m)
{
    return strcmp(m, "GET") == 0    ? MPC_HTTP_GET
           : strcmp(m, "HEAD") == 0 ? MPC_HTTP_HEAD
           : strcmp(m, "POST") == 0 ? MPC_HTTP_POST
                                    : MPC_HTTP_OTHER;
}

/* The request line "METHOD SP TARGET SP HTTP/1.x" of `n` bytes at `in`
 * (no CR, LF or NUL in it): method and target into *r. */
static bool request_line(const char *in, size_t n, mpc_http_req *r)
{
    char line[MPC_HTTP_LINE_MAX];
    if (n >= sizeof line)
        return refuse(r, 414, "mimprof: request line too long");
    memcpy(line, in, n);
    line[n] = '\0';
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || strchr(sp2 + 1, ' ') != NULL || sp1[1] != '/' ||
        strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || strlen(line) != n)
        return refuse(r, 400, "mimprof: malformed HTTP request");
    *sp1 = *sp2 = '\0';
    r->method = method_of(line);
    memcpy(r->target, sp1 + 1, (size_t)(sp2 - sp1));
    char *q = strchr(r->target, '?');
    if (q != NULL)
        *q++ = '\0';
    r->query = q;
    r->symbol = strcmp(r->target, "/debug/pprof/symbol") == 0;
    return true;
}

bool mpc_http_parse(const char *in, size_t len, size_t cap, mpc_http_req *r)
{
    memset(r, 0, sizeof *r);
    const char *end = headers_end(in, len);
    if (end == NULL) {
        if (len < cap)
            return false;
        return refuse(r, 431, "mimprof: request headers larger than 16 KiB");
    }
    size_t n = 0;
    while (n < len && in[n] != '\r' && in[n] != '\n')
        n++;
    if (!request_line(in, n, r) || r->status != 0)
        return true;
    bool post = r->method == MPC_HTTP_POST;
    if (r->symbol ? r->method == MPC_HTTP_OTHER
                  : r->method != MPC_HTTP_GET && r->method != MPC_HTTP_HEAD)
        return refuse(
            r, 405, r->symbol ? "mimprof: only GET, HEAD and POST" : "mimprof: only GET and HEAD");
    size_t start = (size_t)(end - in) + (end[0] == '\r' ? 4 : 2);
    if (!r->symbol || !post) {
        r->body_off = start;
        return true;
    }
    long cl = content_length(in, start);
    if (cl == -2)
        return refuse(r, 400, "mimprof: the body wants a Content-Length of at most 16 KiB");
    if (cl >= 0 && start + (size_t)cl > cap)
        return refuse(r, 413, "mimprof: the body wants a Content-Length of at most 16 KiB");
    size_t body = cl >= 0 ? (size_t)cl : len - start;
    if (len < start + body)
        return false; /* the rest of the body is still to come (len < cap: cl fits) */
    r->body_off = start;
    r->body_len = body;
    return true;
}

long mpc_http_query_seconds(const char *q)
{
    long seconds = 0;
    while (q != NULL && *q != '\0') {
        const char *amp = strchr(q, '&');
        size_t n = amp != NULL ? (size_t)(amp - q) : strlen(q);
        if (n > 8 && memcmp(q, "seconds=", 8) == 0) {
            char *end;
            seconds = strtol(q + 8, &end, 10);
            if (end != q + n || seconds < 1 || seconds > MPC_HTTP_MAX_SECONDS)
                return -1;
        } else if (n > 6 && memcmp(q, "debug=", 6) == 0 && !(n == 7 && q[6] == '0')) {
            return -2;
        }
        q = amp != NULL ? amp + 1 : NULL;
    }
    return seconds;
}
