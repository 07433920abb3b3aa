/* SPDX-License-Identifier: MIT */
/* Helpers shared by the report-side tests: running tools, files, decoding
 * a pprof with the test's own protobuf-c unpacker. */
#ifndef MIMPROF_REPORT_TEST_UTIL_H
#define MIMPROF_REPORT_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profile.pb-c.h"

/* Runs `cmd` through /bin/sh; returns its stdout (malloc()ed, NUL
 * terminated) and its exit status in *status. */
static inline char *ut_run(int *status, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    size_t r;
    while (out && (r = fread(out + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 4096) {
            char *o = realloc(out, cap *= 2);
            if (o == NULL) {
                free(out);
                out = NULL;
                break;
            }
            out = o;
        }
    }
    int st = pclose(p);
    if (status)
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (out)
        out[n] = '\0';
    return out;
}

/* A fresh directory under $TMPDIR (or /tmp). */
static inline char *ut_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/mimprof-report-XXXXXX", base && base[0] ? base : "/tmp") < 0)
        return NULL;
    if (mkdtemp(path) == NULL) {
        free(path);
        return NULL;
    }
    return path;
}

static inline bool ut_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static inline uint8_t *ut_read(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

typedef Perftools__Profiles__Profile ut_prof;

static inline ut_prof *ut_decode(const uint8_t *b, size_t n)
{
    return perftools__profiles__profile__unpack(NULL, n, b);
}

static inline void ut_free(ut_prof *p)
{
    if (p)
        perftools__profiles__profile__free_unpacked(p, NULL);
}

static inline const char *ut_str(const ut_prof *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad index>";
}

static inline const Perftools__Profiles__Function *ut_fn(const ut_prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id)
            return p->function[i];
    return NULL;
}

static inline const Perftools__Profiles__Location *ut_loc(const ut_prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

static inline const Perftools__Profiles__Mapping *ut_map(const ut_prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_mapping; i++)
        if (p->mapping[i]->id == id)
            return p->mapping[i];
    return NULL;
}

/* The location whose address is `addr`, or NULL. */
static inline const Perftools__Profiles__Location *ut_loc_at(const ut_prof *p, uint64_t addr)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->address == addr)
            return p->location[i];
    return NULL;
}

/* Name of line `k` of `l` ("" if none). */
static inline const char *ut_line_fn(const ut_prof *p, const Perftools__Profiles__Location *l,
                                     size_t k)
{
    if (l == NULL || k >= l->n_line)
        return "";
    const Perftools__Profiles__Function *f = ut_fn(p, l->line[k]->function_id);
    return f ? ut_str(p, f->name) : "";
}

static inline const char *ut_line_file(const ut_prof *p, const Perftools__Profiles__Location *l,
                                       size_t k)
{
    if (l == NULL || k >= l->n_line)
        return "";
    const Perftools__Profiles__Function *f = ut_fn(p, l->line[k]->function_id);
    return f ? ut_str(p, f->filename) : "";
}

/* Environment for `go tool pprof`: a private HOME/GOCACHE/GOPATH. */
/* The Go toolchain's environment, sandboxed in `dir`. The build cache is
 * MIMPROF_GOCACHE when set (./dev sets one for every tree): Go 1.25+
 * builds `go tool pprof` on first use, about 45 s of CPU, so one shared
 * cache builds it once per run instead of once per test. */
static inline char *ut_go_env(const char *dir)
{
    const char *shared = getenv("MIMPROF_GOCACHE");
    char *env = NULL;
    if (asprintf(&env,
                 "HOME=%s GOCACHE=%s%s GOPATH=%s/gopath GOFLAGS=-mod=mod "
                 "GOTOOLCHAIN=local GOPROXY=off PPROF_TMPDIR=%s",
                 dir, shared && *shared ? shared : dir, shared && *shared ? "" : "/gocache", dir,
                 dir) < 0)
        return NULL;
    return env;
}

#endif
