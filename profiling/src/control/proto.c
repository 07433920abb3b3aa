/* SPDX-License-Identifier: MIT */
/* The control protocol's request parser (proto.h; fuzzed:
 * ../../fuzz/fuzz_ctl_request.c), its sizes and durations, and the HTTP
 * endpoint's address. */
#include "proto.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <mimprof/profiling.h>

size_t mpc_ctl_name(long pid, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%cmimprof-ctl.%ld", 0, pid);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* ---- sizes and durations --------------------------------------------- */

typedef struct {
    const char *suffix; /* lower case; matched case-insensitively */
    uint64_t scale;
} unit;

static const unit SIZES[] = {{"", 1},          {"b", 1},          {"k", 1u << 10},
                             {"kb", 1u << 10}, {"kib", 1u << 10}, {"m", 1u << 20},
                             {"mb", 1u << 20}, {"mib", 1u << 20}, {"g", 1u << 30},
                             {"gb", 1u << 30}, {"gib", 1u << 30}};
static const unit DURATIONS[] = {{"", 1000},   {"s", 1000},    {"ms", 1},
                                 {"m", 60000}, {"min", 60000}, {"h", 3600000}};

/* The scale of the suffix `s` in `t`, or 0. */
static uint64_t scale_of(const unit *t, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, t[i].suffix) == 0)
            return t[i].scale;
    return 0;
}

/* Leading decimal digits of *s into *v (at least one, no overflow);
 * *s moves past them. With `frac`, a '.' and more digits may follow:
 * the fraction is *frac / *div (9 digits kept). */
static bool decimal(const char **s, uint64_t *v, uint64_t *frac, uint64_t *div)
{
    const char *p = *s;
    *v = 0;
    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p)) {
        uint64_t d = (uint64_t)(*p++ - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
    }
    if (frac != NULL) {
        *frac = 0;
        *div = 1;
        if (*p == '.') {
            if (!isdigit((unsigned char)*++p))
                return false;
            for (; isdigit((unsigned char)*p); p++)
                if (*div < 1000000000u)
                    *frac = *frac * 10 + (uint64_t)(*p - '0'), *div *= 10;
        }
    }
    *s = p;
    return true;
}

bool mpc_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    if (s == NULL || !decimal(&s, &v, NULL, NULL))
        return false;
    uint64_t scale = scale_of(SIZES, sizeof SIZES / sizeof SIZES[0], s);
    if (scale == 0 || v > UINT64_MAX / scale)
        return false;
    *out = v * scale;
    return true;
}

bool mpc_parse_duration_ms(const char *s, uint64_t *out)
{
    uint64_t v, frac, div;
    if (s == NULL || !decimal(&s, &v, &frac, &div))
        return false;
    uint64_t scale = scale_of(DURATIONS, sizeof DURATIONS / sizeof DURATIONS[0], s);
    if (scale == 0 || v > UINT64_MAX / scale / 2)
        return false;
    *out = v * scale + frac * scale / div;
    return true;
}

/* ---- requests ---------------------------------------------------------- */

/* Word `w` (NUL-terminated copy of at most 127 bytes) equals `s`. */
static bool is(const char *w, const char *s) { return strcmp(w, s) == 0; }

/* key=value options of start and set. */
static int option(const char *w, mpc_ctl_req *req, char *why, size_t whylen)
{
    const char *eq = strchr(w, '=');
    if (eq == NULL) {
        snprintf(why, whylen, "'%s' is not KEY=VALUE", w);
        return -1;
    }
    size_t klen = (size_t)(eq - w);
    const char *v = eq + 1;
    if (klen == 8 && memcmp(w, "interval", 8) == 0) {
        if (!mpc_parse_size(v, &req->interval) || req->interval == 0 ||
            req->interval > MP_PROF_MAX_INTERVAL) {
            snprintf(why, whylen, "interval=%s is not a size (e.g. 64k, 1m)", v);
            return -1;
        }
        return 0;
    }
    if (klen == 5 && memcmp(w, "every", 5) == 0 && req->cmd == MPC_CTL_START) {
        if (!mpc_parse_duration_ms(v, &req->every_ms)) {
            snprintf(why, whylen, "every=%s is not a duration (e.g. 10s, 500ms, 0)", v);
            return -1;
        }
        req->has_every = true;
        return 0;
    }
    snprintf(why, whylen, "unknown option '%.*s'", (int)klen, w);
    return -1;
}

int mpc_ctl_parse(const char *line, size_t len, mpc_ctl_req *req, char *why, size_t whylen)
{
    memset(req, 0, sizeof *req);
    if (len == 0) {
        snprintf(why, whylen, "empty request");
        return -1;
    }
    if (len > MPC_CTL_MAX_LINE) {
        snprintf(why, whylen, "request longer than %d bytes", MPC_CTL_MAX_LINE);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e) {
            snprintf(why, whylen, "byte 0x%02x at %zu: requests are printable ASCII",
                     (unsigned char)line[i], i);
            return -1;
        }
    char words[8][128];
    int n = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && line[j] != ' ')
            j++;
        if (j == i) {
            snprintf(why, whylen, "words are separated by one space");
            return -1;
        }
        if (n == 8 || j - i >= sizeof words[0]) {
            snprintf(why, whylen, n == 8 ? "too many words" : "a word longer than 127 bytes");
            return -1;
        }
        memcpy(words[n], line + i, j - i);
        words[n++][j - i] = '\0';
        i = j + 1;
        if (j + 1 == len) {
            snprintf(why, whylen, "trailing space");
            return -1;
        }
    }
    const char *c = words[0];
    int max_opts = 0;
    if (is(c, "status"))
        req->cmd = MPC_CTL_STATUS;
    else if (is(c, "start"))
        req->cmd = MPC_CTL_START, max_opts = 2;
    else if (is(c, "stop"))
        req->cmd = MPC_CTL_STOP;
    else if (is(c, "report"))
        req->cmd = MPC_CTL_REPORT;
    else if (is(c, "image"))
        req->cmd = MPC_CTL_IMAGE;
    else if (is(c, "set"))
        req->cmd = MPC_CTL_SET, max_opts = 1;
    else {
        snprintf(why, whylen, "unknown command '%s' (status, start, stop, report, image, set)", c);
        return -1;
    }
    if (n - 1 > max_opts) {
        snprintf(why, whylen, "%s takes %s", c,
                 max_opts == 0   ? "no argument"
                 : max_opts == 1 ? "one argument: interval=SIZE"
                                 : "at most interval=SIZE and every=DURATION");
        return -1;
    }
    for (int k = 1; k < n; k++)
        if (option(words[k], req, why, whylen) != 0)
            return -1;
    if (req->cmd == MPC_CTL_SET && req->interval == 0) {
        snprintf(why, whylen, "set needs interval=SIZE");
        return -1;
    }
    return 0;
}

int mpc_http_parse_addr(const char *spec, bool wildcard_ok, void *ssv, unsigned *sslen, char *why,
                        size_t whylen)
{
    struct sockaddr_storage *ss = ssv;
    memset(ss, 0, sizeof *ss);
    char host[64] = "127.0.0.1";
    const char *colon = strrchr(spec, ':');
    const char *port = colon != NULL ? colon + 1 : spec;
    if (colon != NULL && colon != spec) {
        size_t hl = (size_t)(colon - spec);
        if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') { /* [v6]:port */
            spec++;
            hl -= 2;
        }
        if (hl == 0 || hl >= sizeof host) {
            snprintf(why, whylen, "'%s' is not ADDR:PORT", spec);
            return -1;
        }
        memcpy(host, spec, hl);
        host[hl] = '\0';
    }
    char *end;
    errno = 0;
    long pn = strtol(port, &end, 10);
    if (port[0] < '0' || port[0] > '9' || *end != '\0' || errno != 0 || pn < 0 || pn > 65535) {
        snprintf(why, whylen, "'%s' is not a port (0..65535)", port);
        return -1;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    bool wildcard;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)pn);
        *sslen = sizeof *v4;
        wildcard = v4->sin_addr.s_addr == htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)pn);
        *sslen = sizeof *v6;
        wildcard = memcmp(&v6->sin6_addr, &in6addr_any, sizeof in6addr_any) == 0;
    } else {
        snprintf(why, whylen, "'%s' is not a numeric IPv4 or IPv6 address (or localhost)", host);
        return -1;
    }
    if (wildcard && !wildcard_ok) {
        snprintf(why, whylen,
                 "%s listens on every interface: refused unless asked for explicitly "
                 "(--http-wildcard, MIMPROF_HTTP_WILDCARD=1, or the control's http_wildcard)",
                 host);
        return -1;
    }
    return 0;
}
