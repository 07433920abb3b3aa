/* SPDX-License-Identifier: MIT */
/* A raw HTTP/1.1 capture server on 127.0.0.1: records every request byte
 * for byte and answers with a fixed status, headers and body. One thread,
 * one connection at a time, keep-alive supported. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t read_some(int fd, uint8_t *p, size_t n, atomic_bool *stop)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    for (int waited = 0; waited < 10000 && !atomic_load(stop); waited += 50) {
        int r = poll(&pfd, 1, 50);
        if (r > 0)
            return read(fd, p, n);
        if (r < 0)
            return -1;
    }
    return -1;
}

static void serve_conn(cap_server *c, int fd)
{
    tbuf in = {0};
    for (;;) {
        char *end;
        while (!(in.p && (end = memmem(in.p, in.len, "\r\n\r\n", 4)))) {
            uint8_t chunk[65536];
            ssize_t r = read_some(fd, chunk, sizeof chunk, &c->stop);
            if (r <= 0)
                goto done;
            tbuf_put(&in, chunk, (size_t)r);
        }
        size_t head_len = (size_t)(end - (char *)in.p) + 4;
        size_t body_len = 0;
        for (char *line = (char *)in.p; line < end;) {
            char *nl = memmem(line, (size_t)(end - line) + 2, "\r\n", 2);
            if (strncasecmp(line, "Content-Length:", 15) == 0)
                body_len = strtoul(line + 15, NULL, 10);
            line = nl ? nl + 2 : end;
        }
        while (in.len < head_len + body_len) {
            uint8_t chunk[65536];
            ssize_t r = read_some(fd, chunk, sizeof chunk, &c->stop);
            if (r <= 0)
                goto done;
            tbuf_put(&in, chunk, (size_t)r);
        }
        pthread_mutex_lock(&c->mu);
        if (c->nreqs < 64) {
            cap_request *q = &c->reqs[c->nreqs++];
            q->head = strndup((char *)in.p, head_len);
            q->body = malloc(body_len ? body_len : 1);
            memcpy(q->body, in.p + head_len, body_len);
            q->body_len = body_len;
        }
        char resp[2048];
        int n = snprintf(
            resp, sizeof resp,
            "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n%s",
            c->status, strlen(c->body), c->extra, c->body);
        pthread_mutex_unlock(&c->mu);
        if (write(fd, resp, (size_t)n) != n)
            goto done;
        size_t used = head_len + body_len;
        memmove(in.p, in.p + used, in.len - used);
        in.len -= used;
    }
done:
    tbuf_free(&in);
    close(fd);
}

static void *cap_main(void *arg)
{
    cap_server *c = arg;
    while (!atomic_load(&c->stop)) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(c->fd, NULL, NULL);
        if (fd >= 0)
            serve_conn(c, fd);
    }
    return NULL;
}

bool cap_start(cap_server *c, int status, const char *extra_headers, const char *body)
{
    memset(c, 0, sizeof *c);
    atomic_init(&c->stop, false);
    pthread_mutex_init(&c->mu, NULL);
    c->status = status;
    snprintf(c->extra, sizeof c->extra, "%s", extra_headers ? extra_headers : "");
    snprintf(c->body, sizeof c->body, "%s", body ? body : "");
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(c->fd, 8) != 0 ||
        getsockname(c->fd, (struct sockaddr *)&a, &al) != 0)
        return false;
    c->port = ntohs(a.sin_port);
    snprintf(c->url, sizeof c->url, "http://127.0.0.1:%d", c->port);
    return pthread_create(&c->thread, NULL, cap_main, c) == 0;
}

void cap_stop(cap_server *c)
{
    atomic_store(&c->stop, true);
    pthread_join(c->thread, NULL);
    close(c->fd);
    for (int i = 0; i < c->nreqs; i++) {
        free(c->reqs[i].head);
        free(c->reqs[i].body);
    }
    pthread_mutex_destroy(&c->mu);
}

int cap_count(cap_server *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->nreqs;
    pthread_mutex_unlock(&c->mu);
    return n;
}

char *cap_header(cap_server *c, int i, const char *name)
{
    pthread_mutex_lock(&c->mu);
    char *out = NULL;
    if (i < c->nreqs) {
        size_t nlen = strlen(name);
        for (char *line = strstr(c->reqs[i].head, "\r\n"); line && line[2];) {
            line += 2;
            if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
                const char *v = line + nlen + 1;
                while (*v == ' ')
                    v++;
                out = strndup(v, strcspn(v, "\r"));
                break;
            }
            line = strstr(line, "\r\n");
        }
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

char *cap_request_line(cap_server *c, int i)
{
    pthread_mutex_lock(&c->mu);
    char *out = i < c->nreqs ? strndup(c->reqs[i].head, strcspn(c->reqs[i].head, "\r")) : NULL;
    pthread_mutex_unlock(&c->mu);
    return out;
}
