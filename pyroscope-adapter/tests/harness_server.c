/* SPDX-License-Identifier: MIT */
/* The Python stand-in as a subprocess (or a real server), its control
 * port, and the Connect query API (protobuf), for the tests. */
#include "harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TS_PYTHON
#define TS_PYTHON "/usr/bin/python3"
#endif
#ifndef TS_SERVER
#define TS_SERVER ""
#endif

const char *ts_external_url(void)
{
    const char *u = getenv("MIMPROF_PYROSCOPE_URL");
    return u && *u ? u : NULL;
}

double ts_env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : dflt;
}

bool ts_have_standin(void)
{
    return TS_SERVER[0] && access(TS_SERVER, R_OK) == 0 && access(TS_PYTHON, X_OK) == 0;
}

bool ts_start(ts_server *s, const char *const *args)
{
    memset(s, 0, sizeof *s);
    if (!ts_have_standin())
        return false;
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return false;
    const char *argv[40] = {TS_PYTHON, TS_SERVER};
    int n = 2;
    for (int i = 0; args && args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        execv(TS_PYTHON, (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(pipefd[1]);
    char line[256];
    size_t len = 0;
    struct pollfd pfd = {pipefd[0], POLLIN, 0};
    while (len < sizeof line - 1 && (len == 0 || line[len - 1] != '\n')) {
        if (poll(&pfd, 1, 15000) <= 0)
            break;
        ssize_t r = read(pipefd[0], line + len, 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    line[len] = '\0';
    close(pipefd[0]);
    if (sscanf(line, "READY data=%d control=%d", &s->port, &s->control) != 2) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "stand-in did not start: '%s'\n", line);
        return false;
    }
    s->pid = pid;
    bool tls = false;
    for (int i = 0; args && args[i]; i++)
        tls = tls || strcmp(args[i], "--tls-cert") == 0;
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", tls ? "https" : "http", s->port);
    return true;
}

bool ts_start_any(ts_server *s, const char *const *args)
{
    const char *ext = ts_external_url();
    if (!ext)
        return ts_start(s, args);
    memset(s, 0, sizeof *s);
    s->external = true;
    snprintf(s->url, sizeof s->url, "%s", ext);
    size_t n = strlen(s->url);
    while (n && s->url[n - 1] == '/')
        s->url[--n] = '\0';
    return true;
}

void ts_stop(ts_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *user)
{
    tbuf_put(user, p, size * n);
    return size * n;
}

long http_post(const char *url, const char *const *headers, const void *body, size_t len,
               tbuf *resp)
{
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    struct curl_slist *h = NULL;
    for (int i = 0; headers && headers[i]; i++)
        h = curl_slist_append(h, headers[i]);
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, len ? body : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
    long code = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return code;
}

static char *ctl_url(ts_server *s, const char *path)
{
    char *u = NULL;
    if (asprintf(&u, "http://127.0.0.1:%d%s", s->control, path) < 0)
        return NULL;
    return u;
}

bool ts_post(ts_server *s, const char *path, const char *json)
{
    if (s->external)
        return false;
    char *u = ctl_url(s, path);
    tbuf r = {0};
    const char *h[] = {"Content-Type: application/json", NULL};
    long code = http_post(u, h, json, strlen(json), &r);
    free(u);
    tbuf_free(&r);
    return code == 200;
}

char *ts_get(ts_server *s, const char *path)
{
    if (s->external)
        return NULL;
    char *u = ctl_url(s, path);
    CURL *c = curl_easy_init();
    tbuf r = {0};
    tbuf_put(&r, "", 0);
    curl_easy_setopt(c, CURLOPT_URL, u);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    free(u);
    if (rc != CURLE_OK) {
        tbuf_free(&r);
        return NULL;
    }
    return (char *)r.p;
}

long ts_summary(ts_server *s, const char *key)
{
    char *t = ts_get(s, "/summary");
    long v = 0;
    size_t klen = strlen(key);
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ')
            v = strtol(line + klen + 1, NULL, 10);
        line = nl ? nl + 1 : NULL;
    }
    free(t);
    return v;
}

long ts_records(ts_server *s, const char *type_id)
{
    char *t = ts_get(s, "/profiles.tsv");
    long n = 0;
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        char *tab1 = strchr(line, '\t');
        char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        char *tab3 = tab2 ? strchr(tab2 + 1, '\t') : NULL;
        if (tab3 && (size_t)(tab3 - tab2 - 1) == strlen(type_id) &&
            strncmp(tab2 + 1, type_id, strlen(type_id)) == 0)
            n++;
        line = nl ? nl + 1 : NULL;
    }
    free(t);
    return n;
}

/* --- Connect queries --------------------------------------------------------- */

static long query(const char *base, const char *tenant, const char *method, const tbuf *req,
                  tbuf *resp)
{
    char url[600], org[200];
    snprintf(url, sizeof url, "%s/querier.v1.QuerierService/%s", base, method);
    snprintf(org, sizeof org, "X-Scope-OrgID: %s", tenant ? tenant : "");
    const char *h[] = {"Content-Type: application/proto", "Connect-Protocol-Version: 1",
                       tenant ? org : NULL, NULL};
    return http_post(url, h, req->p, req->len, resp);
}

static void range_req(tbuf *b, const char *type_id, const char *selector, int64_t s, int64_t e)
{
    pbw_str(b, 1, type_id);
    pbw_str(b, 2, selector);
    pbw_varint(b, 3, (uint64_t)s);
    pbw_varint(b, 4, (uint64_t)e);
}

double q_series_sum(const char *base, const char *tenant, const char *type_id, const char *selector,
                    int64_t start_ms, int64_t end_ms)
{
    tbuf req = {0}, resp = {0};
    range_req(&req, type_id, selector, start_ms, end_ms);
    pbw_double(&req, 6, 10.0);
    long code = query(base, tenant, "SelectSeries", &req, &resp);
    double sum = -1;
    if (code == 200) {
        sum = 0;
        pbr r = {resp.p, resp.p ? resp.p + resp.len : NULL, false};
        pbf f;
        while (pb_next(&r, &f)) {
            if (f.field != 1)
                continue;
            pbr s = pb_sub(&f);
            pbf g;
            while (pb_next(&s, &g)) {
                if (g.field != 2)
                    continue;
                pbr p = pb_sub(&g);
                pbf h;
                while (pb_next(&p, &h)) {
                    if (h.field == 1 && h.wt == 1) {
                        double d;
                        memcpy(&d, &h.v, 8);
                        sum += d;
                    }
                }
            }
        }
    } else {
        fprintf(stderr, "SelectSeries %s: HTTP %ld %.*s\n", base, code, (int)resp.len,
                resp.p ? (const char *)resp.p : "");
    }
    tbuf_free(&req);
    tbuf_free(&resp);
    return sum;
}

bool q_merge(const char *base, const char *tenant, const char *type_id, const char *selector,
             int64_t start_ms, int64_t end_ms, tp_profile *out)
{
    tbuf req = {0}, resp = {0};
    range_req(&req, type_id, selector, start_ms, end_ms);
    long code = query(base, tenant, "SelectMergeProfile", &req, &resp);
    bool ok = code == 200 && tp_decode_answer(resp.p, resp.len, out);
    tbuf_free(&req);
    tbuf_free(&resp);
    return ok;
}

bool q_label_has(const char *base, const char *tenant, const char *name, const char *value,
                 int64_t start_ms, int64_t end_ms)
{
    tbuf req = {0}, resp = {0};
    pbw_str(&req, 1, name);
    pbw_varint(&req, 3, (uint64_t)start_ms);
    pbw_varint(&req, 4, (uint64_t)end_ms);
    long code = query(base, tenant, "LabelValues", &req, &resp);
    bool found = false;
    if (code == 200) {
        pbr r = {resp.p, resp.p ? resp.p + resp.len : NULL, false};
        pbf f;
        while (pb_next(&r, &f))
            if (f.field == 1 && f.len == strlen(value) && memcmp(f.data, value, f.len) == 0)
                found = true;
    }
    tbuf_free(&req);
    tbuf_free(&resp);
    return found;
}

bool q_has_type(const char *base, const char *tenant, const char *id, int64_t start_ms,
                int64_t end_ms)
{
    tbuf req = {0}, resp = {0};
    pbw_varint(&req, 1, (uint64_t)start_ms);
    pbw_varint(&req, 2, (uint64_t)end_ms);
    long code = query(base, tenant, "ProfileTypes", &req, &resp);
    bool found = false;
    if (code == 200) {
        pbr r = {resp.p, resp.p ? resp.p + resp.len : NULL, false};
        pbf f;
        while (pb_next(&r, &f)) {
            if (f.field != 1)
                continue;
            pbr s = pb_sub(&f);
            pbf g;
            while (pb_next(&s, &g))
                if (g.field == 1 && g.len == strlen(id) && memcmp(g.data, id, g.len) == 0)
                    found = true;
        }
    }
    tbuf_free(&req);
    tbuf_free(&resp);
    return found;
}

/* --- polling for eventual visibility ------------------------------------------- */

bool q_label_has_wait(const char *base, const char *tenant, const char *name, const char *value,
                      int64_t start_ms, int64_t end_ms, int deadline_ms)
{
    int64_t until = now_ms() + deadline_ms;
    bool got;
    while (!(got = q_label_has(base, tenant, name, value, start_ms, end_ms)) && now_ms() < until)
        sleep_ms(500);
    return got;
}

bool q_has_type_wait(const char *base, const char *tenant, const char *id, int64_t start_ms,
                     int64_t end_ms, int deadline_ms)
{
    int64_t until = now_ms() + deadline_ms;
    bool got;
    while (!(got = q_has_type(base, tenant, id, start_ms, end_ms)) && now_ms() < until)
        sleep_ms(500);
    return got;
}

static int64_t merge_total(const char *base, const char *tenant, const char *type_id,
                           const char *selector, int64_t start_ms, int64_t end_ms)
{
    tp_profile p;
    if (!q_merge(base, tenant, type_id, selector, start_ms, end_ms, &p))
        return -1;
    /* the type id's second field names the sample type */
    char st[128] = "";
    const char *c1 = strchr(type_id, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c1 && c2 && (size_t)(c2 - c1 - 1) < sizeof st)
        memcpy(st, c1 + 1, (size_t)(c2 - c1 - 1));
    int t = tp_type_index(&p, st);
    int64_t v = t >= 0 ? tp_total_at(&p, t) : 0; /* no profile: no sample types */
    tp_free(&p);
    return v;
}

int64_t q_merge_total_wait(const char *base, const char *tenant, const char *type_id,
                           const char *selector, int64_t start_ms, int64_t end_ms, int64_t want,
                           int deadline_ms)
{
    int64_t until = now_ms() + deadline_ms;
    int64_t got;
    while ((got = merge_total(base, tenant, type_id, selector, start_ms, end_ms)) != want &&
           now_ms() < until)
        sleep_ms(500);
    return got;
}
