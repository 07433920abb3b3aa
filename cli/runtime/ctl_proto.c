/* The control protocol's request parser (ctl_proto.h). Fuzzed:
 * ../fuzz/fuzz_ctl_request.c. */
#include "ctl_proto.h"

#include <stdio.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "units.h"

size_t mpt_ctl_name(long pid, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%cmimprof-ctl.%ld", 0, pid);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* Word `w` (NUL-terminated copy of at most 127 bytes) equals `s`. */
static bool is(const char *w, const char *s) { return strcmp(w, s) == 0; }

/* key=value options of start and set. */
static int option(const char *w, mpt_ctl_req *req, char *why, size_t whylen)
{
    const char *eq = strchr(w, '=');
    if (eq == NULL) {
        snprintf(why, whylen, "'%s' is not KEY=VALUE", w);
        return -1;
    }
    size_t klen = (size_t)(eq - w);
    const char *v = eq + 1;
    if (klen == 8 && memcmp(w, "interval", 8) == 0) {
        if (!mpt_parse_size(v, &req->interval) || req->interval == 0 ||
            req->interval > MP_PROF_MAX_INTERVAL) {
            snprintf(why, whylen, "interval=%s is not a size (e.g. 64k, 1m)", v);
            return -1;
        }
        return 0;
    }
    if (klen == 5 && memcmp(w, "every", 5) == 0 && req->cmd == MPT_CTL_START) {
        if (!mpt_parse_duration_ms(v, &req->every_ms)) {
            snprintf(why, whylen, "every=%s is not a duration (e.g. 10s, 500ms, 0)", v);
            return -1;
        }
        req->has_every = true;
        return 0;
    }
    snprintf(why, whylen, "unknown option '%.*s'", (int)klen, w);
    return -1;
}

int mpt_ctl_parse(const char *line, size_t len, mpt_ctl_req *req, char *why, size_t whylen)
{
    memset(req, 0, sizeof *req);
    if (len == 0) {
        snprintf(why, whylen, "empty request");
        return -1;
    }
    if (len > MPT_CTL_MAX_LINE) {
        snprintf(why, whylen, "request longer than %d bytes", MPT_CTL_MAX_LINE);
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
        req->cmd = MPT_CTL_STATUS;
    else if (is(c, "start"))
        req->cmd = MPT_CTL_START, max_opts = 2;
    else if (is(c, "stop"))
        req->cmd = MPT_CTL_STOP;
    else if (is(c, "report"))
        req->cmd = MPT_CTL_REPORT;
    else if (is(c, "image"))
        req->cmd = MPT_CTL_IMAGE;
    else if (is(c, "set"))
        req->cmd = MPT_CTL_SET, max_opts = 1;
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
    if (req->cmd == MPT_CTL_SET && req->interval == 0) {
        snprintf(why, whylen, "set needs interval=SIZE");
        return -1;
    }
    return 0;
}
