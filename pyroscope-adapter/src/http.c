/* SPDX-License-Identifier: MIT */
/* HTTP transport over libcurl. Redirects are never followed (Pyroscope's
 * Go client does the same: a redirected request would lose or, worse,
 * leak its Authorization header); a 3xx is a rejection with the Location
 * in the message. */
#define _GNU_SOURCE
#include "http.h"

#include <mimprof/profiling.h>

#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "reply.h"
#include "retry.h"
#include "util.h"

#ifndef MP_PYRO_PACKAGE_VERSION
#define MP_PYRO_PACKAGE_VERSION "0.0.0"
#endif

#define MAX_RESPONSE 8192

typedef struct response {
    char data[MAX_RESPONSE + 1];
    size_t len;
} response;

struct mp_pyro_http {
    CURLM *multi;
    CURL *easy;
    response resp;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

mp_pyro_status mp_pyro_http_new(mp_pyro_http **out)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return MP_PYRO_E_INTERNAL;
    mp_pyro_http *h = calloc(1, sizeof *h);
    if (!h)
        return MP_PYRO_E_NOMEM;
    h->multi = curl_multi_init();
    h->easy = curl_easy_init();
    if (!h->multi || !h->easy) {
        mp_pyro_http_free(h);
        return MP_PYRO_E_NOMEM;
    }
    *out = h;
    return MP_PYRO_OK;
}

void mp_pyro_http_free(mp_pyro_http *h)
{
    if (!h)
        return;
    if (h->easy)
        curl_easy_cleanup(h->easy);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    free(h);
}

void mp_pyro_http_wakeup(mp_pyro_http *h)
{
    if (h)
        curl_multi_wakeup(h->multi);
}

static size_t on_write(char *p, size_t size, size_t n, void *user)
{
    response *r = user;
    size_t len = size * n;
    size_t room = MAX_RESPONSE - r->len;
    size_t take = len < room ? len : room;
    memcpy(r->data + r->len, p, take);
    r->len += take;
    r->data[r->len] = '\0';
    return len;
}

static mp_pyro_status classify_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return MP_PYRO_OK;
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_ABORTED_BY_CALLBACK:
        return MP_PYRO_E_TIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED:
        return MP_PYRO_E_TLS;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return MP_PYRO_E_INVALID_URL;
    case CURLE_OUT_OF_MEMORY:
        return MP_PYRO_E_NOMEM;
    default:
        /* resolve, connect, send, recv, empty reply, HTTP/2 stream errors */
        return MP_PYRO_E_CONNECT;
    }
}

static struct curl_slist *add(struct curl_slist *l, int *oom, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static struct curl_slist *add(struct curl_slist *l, int *oom, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0) {
        *oom = 1;
        return l;
    }
    struct curl_slist *nl = curl_slist_append(l, line);
    explicit_bzero(line, (size_t)n);
    free(line);
    if (!nl) {
        *oom = 1;
        return l;
    }
    return nl;
}

static struct curl_slist *build_headers(const mp_pyro_config *cfg, const mp_pyro_request *req,
                                        int *oom)
{
    struct curl_slist *l = NULL;
    l = add(l, oom, "Content-Type: %s", req->content_type);
    if (req->connect)
        l = add(l, oom, "Connect-Protocol-Version: 1");
    if (cfg->bearer) {
        l = add(l, oom, "Authorization: Bearer %s", cfg->bearer);
    } else if (cfg->basic_user) {
        mp_pyro_buf cred = {0}, b64 = {0};
        mp_pyro_buf_printf(&cred, "%s:%s", cfg->basic_user,
                           cfg->basic_password ? cfg->basic_password : "");
        mp_pyro_buf_put_base64(&b64, cred.data, cred.len);
        const char *enc = mp_pyro_buf_cstr(&b64);
        if (cred.oom || !enc)
            *oom = 1;
        else
            l = add(l, oom, "Authorization: Basic %s", enc);
        if (cred.data)
            explicit_bzero(cred.data, cred.len);
        if (b64.data)
            explicit_bzero(b64.data, b64.len);
        mp_pyro_buf_free(&cred);
        mp_pyro_buf_free(&b64);
    }
    if (cfg->tenant)
        l = add(l, oom, "X-Scope-OrgID: %s", cfg->tenant);
    for (size_t i = 0; i < cfg->nheaders; i++)
        l = add(l, oom, "%s: %s", cfg->headers[i].name, cfg->headers[i].value);
    l = add(l, oom, "Expect:");
    return l;
}

/* The URL without its query, for messages. */
static void url_path(const char *url, char *out, size_t len)
{
    size_t n = strcspn(url, "?");
    if (n >= len)
        n = len - 1;
    memcpy(out, url, n);
    out[n] = '\0';
}

/* The agent's sockets are close-on-exec and at the top of the descriptor
 * range (mp_prof_fd_high): a daemon that closes 0-1023 and reopens its
 * files never finds a socket of ours there, and a program that closed
 * stderr never has its next file become our connection. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)clientp;
    (void)purpose;
    int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    return fd < 0 ? CURL_SOCKET_BAD : mp_prof_fd_high(fd);
}

static void setup(CURL *e, const mp_pyro_config *cfg, const mp_pyro_request *req,
                  struct curl_slist *headers, response *resp, char *errbuf)
{
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body.len ? (const char *)req->body.data : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body.len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "mimprof-pyroscope/" MP_PYRO_PACKAGE_VERSION);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)cfg->request_timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    if (cfg->ca_path)
        curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_path);
}

void mp_pyro_http_send(mp_pyro_http *h, const mp_pyro_config *cfg, const mp_pyro_request *req,
                       const _Atomic int64_t *abort_at, mp_pyro_http_result *res)
{
    memset(res, 0, sizeof *res);
    int oom = 0;
    struct curl_slist *headers = build_headers(cfg, req, &oom);
    response *resp = &h->resp;
    char errbuf[CURL_ERROR_SIZE] = "";
    char where[256];
    url_path(req->url, where, sizeof where);
    if (oom) {
        curl_slist_free_all(headers);
        res->status = MP_PYRO_E_NOMEM;
        mp_pyro_fmt(res->message, sizeof res->message, "out of memory building the request");
        return;
    }
    resp->len = 0;
    resp->data[0] = '\0';
    setup(h->easy, cfg, req, headers, resp, errbuf);
    curl_multi_add_handle(h->multi, h->easy);
    CURLcode rc = CURLE_OK;
    bool aborted = false;
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(h->multi, &running);
        if (mc != CURLM_OK) {
            rc = CURLE_OUT_OF_MEMORY;
            break;
        }
        if (!running)
            break;
        int wait_ms = 1000;
        int64_t deadline = abort_at ? atomic_load(abort_at) : 0;
        if (deadline) {
            int64_t left = deadline - mp_pyro_now_mono_ns();
            if (left <= 0) {
                aborted = true;
                break;
            }
            if (left / 1000000 < wait_ms)
                wait_ms = (int)(left / 1000000) + 1;
        }
        curl_multi_poll(h->multi, NULL, 0, wait_ms, NULL);
    }
    int left_msgs;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(h->multi, &left_msgs)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy)
            rc = msg->data.result;
    curl_multi_remove_handle(h->multi, h->easy);
    curl_slist_free_all(headers);

    if (aborted) {
        res->status = MP_PYRO_E_TIMEOUT;
        res->curl_code = CURLE_ABORTED_BY_CALLBACK;
        mp_pyro_fmt(res->message, sizeof res->message, "POST %s abandoned at the flush deadline",
                    where);
        return;
    }
    res->curl_code = (int)rc;
    if (rc != CURLE_OK) {
        res->status = classify_curl(rc);
        mp_pyro_fmt(res->message, sizeof res->message, "POST %s: %s%s%s", where,
                    curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
        size_t n = strlen(res->message);
        if (n && res->message[n - 1] == '\n')
            res->message[n - 1] = '\0';
        return;
    }
    long code = 0;
    curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &code);
    res->http_code = code;
    if (code >= 200 && code < 300) {
        res->status = MP_PYRO_OK;
        return;
    }
    char smsg[300];
    mp_pyro_server_message(resp->data, smsg, sizeof smsg);
    if (code >= 300 && code < 400) {
        char *loc = NULL;
        curl_easy_getinfo(h->easy, CURLINFO_REDIRECT_URL, &loc);
        char locs[200];
        url_path(loc ? loc : "(none)", locs, sizeof locs);
        res->status = MP_PYRO_E_HTTP_REJECTED;
        mp_pyro_fmt(res->message, sizeof res->message,
                    "POST %s: HTTP %ld redirect to %s not followed (credentials are never sent "
                    "to another URL); configure the final server URL",
                    where, code, locs);
        return;
    }
    /* 408: Pyroscope 2.0 could not read the request body in time, a
     * transient failure of the connection, retried as a timeout. */
    res->status = code == 429   ? MP_PYRO_E_HTTP_RATE_LIMITED
                  : code == 408 ? MP_PYRO_E_TIMEOUT
                  : code >= 500 ? MP_PYRO_E_HTTP_SERVER
                  : code == 422 ? mp_pyro_classify_422(smsg)
                                : MP_PYRO_E_HTTP_REJECTED;
    mp_pyro_fmt(res->message, sizeof res->message, "POST %s: HTTP %ld: %s", where, code,
                smsg[0] ? smsg : "(no message)");
}
