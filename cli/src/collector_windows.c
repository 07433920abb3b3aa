/* SPDX-License-Identifier: MIT */
/* The service's windows in the report directory (collector.h): the
 * reports of every process of the tree in one window merged
 * (collector_merge.c) into service.<end_ms>.pb.gz (and the window's
 * peaks into service.<end_ms>.peak.pb.gz), so that the service's memory
 * over time outlives the files of processes that ended, which the
 * retention rule retires first (collector_store.c).
 *
 * The windows are the uploads' (collector_pyro.c): a report ending at
 * `to` joins the window ending at the multiple of the period P nearest
 * to `to`; a window is written P/2 (at most 2 s) after its end; a report
 * for a window already written joins the next one. In-use values are a
 * gauge: of several reports of one process in a window only the last
 * one's count; a process's peak: its last one. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "collector.h"

typedef struct {
    int64_t end; /* the window's end (ns) */
    pid_t pid;
    int64_t to;
    uint8_t *buf;
    size_t len;
    bool peak;
} held;

struct mpt_cwin {
    int64_t period_ns;
    int64_t done_end; /* the last window written (its end), 0: none */
    held *v;
    size_t n, cap;
    pid_t first;  /* the first process that reported */
    bool several; /* another one has: the tree is more than one process */
    mpt_cwin_sink sink;
    void *ctx;
};

mpt_cwin *mpt_cwin_new(uint64_t period_ms, mpt_cwin_sink sink, void *ctx)
{
    mpt_cwin *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->period_ns = (int64_t)(period_ms > 0 ? period_ms : 10000) * 1000000;
    w->sink = sink;
    w->ctx = ctx;
    return w;
}

static int64_t grace(const mpt_cwin *w)
{
    int64_t g = w->period_ns / 2;
    return g < 2000000000 ? g : 2000000000;
}

static void hold(mpt_cwin *w, pid_t pid, const uint8_t *buf, size_t len, int64_t to, bool peak)
{
    int64_t end = (to + w->period_ns / 2) / w->period_ns * w->period_ns;
    if (end <= w->done_end)
        end = w->done_end + w->period_ns; /* late: the next window */
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        held *v = realloc(w->v, cap * sizeof *v);
        if (v == NULL)
            return;
        w->v = v;
        w->cap = cap;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL)
        return;
    memcpy(copy, buf, len);
    w->v[w->n++] = (held){.end = end, .pid = pid, .to = to, .buf = copy, .len = len, .peak = peak};
}

void mpt_cwin_add(mpt_cwin *w, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                  size_t pklen, int64_t to_ns)
{
    if (w->first == 0)
        w->first = pid;
    w->several |= pid != w->first;
    hold(w, pid, buf, len, to_ns, false);
    if (pk != NULL && pklen > 0)
        hold(w, pid, pk, pklen, to_ns, true);
}

int64_t mpt_cwin_due(const mpt_cwin *w)
{
    int64_t due = 0;
    for (size_t i = 0; i < w->n; i++)
        if (due == 0 || w->v[i].end + grace(w) < due)
            due = w->v[i].end + grace(w);
    return due;
}

/* Whether held entry i is superseded in its window: a later report (or
 * peak) of the same process in the same window. */
static bool superseded(const mpt_cwin *w, size_t i)
{
    for (size_t j = 0; j < w->n; j++)
        if (j != i && w->v[j].end == w->v[i].end && w->v[j].pid == w->v[i].pid &&
            w->v[j].peak == w->v[i].peak &&
            (w->v[j].to > w->v[i].to || (w->v[j].to == w->v[i].to && j > i)))
            return true;
    return false;
}

/* Writes the window ending at `end` (its peaks apart) and forgets it. A
 * tree of one process writes none: its own files say the same. */
static void write_window(mpt_cwin *w, int64_t end)
{
    mpt_merge_in *in = w->several ? calloc(w->n, sizeof *in) : NULL;
    uint8_t *m[2] = {NULL, NULL};
    size_t mlen[2] = {0, 0};
    for (int peak = 0; peak < 2 && in != NULL; peak++) {
        size_t k = 0;
        for (size_t i = 0; i < w->n; i++) {
            if (w->v[i].end != end || w->v[i].peak != (bool)peak)
                continue;
            bool last = !superseded(w, i);
            if (peak && !last)
                continue;
            in[k++] = (mpt_merge_in){.buf = w->v[i].buf, .len = w->v[i].len, .inuse = last};
        }
        if (k > 0 &&
            mpt_pprof_merge(in, k, end - w->period_ns, w->period_ns, &m[peak], &mlen[peak]) != 0)
            m[peak] = NULL;
    }
    if (m[0] != NULL)
        w->sink(w->ctx, end, m[0], mlen[0], m[1], mlen[1]);
    free(m[0]);
    free(m[1]);
    free(in);
    size_t o = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->v[i].end == end)
            free(w->v[i].buf);
        else
            w->v[o++] = w->v[i];
    }
    w->n = o;
    if (end > w->done_end)
        w->done_end = end;
}

void mpt_cwin_flush(mpt_cwin *w, int64_t now_ns, bool all)
{
    for (;;) {
        int64_t end = 0;
        for (size_t i = 0; i < w->n; i++)
            if (end == 0 || w->v[i].end < end)
                end = w->v[i].end;
        if (end == 0 || (!all && end + grace(w) > now_ns))
            return;
        write_window(w, end);
    }
}

void mpt_cwin_free(mpt_cwin *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].buf);
    free(w->v);
    free(w);
}
