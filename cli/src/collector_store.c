/* SPDX-License-Identifier: MIT */
/* The collector's report files and their retention rule (collector.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector.h"
#include "rt_output.h"
#include "rt_peak.h"

void mpt_store_init(mpt_store *s, const mpt_coll_opts *o)
{
    memset(s, 0, sizeof *s);
    s->o = o;
}

void mpt_store_free(mpt_store *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int name(const mpt_store *s, pid_t pid, uint64_t seq, char *dst, size_t cap)
{
    int n = pid == 0
                ? snprintf(dst, cap, "%s/service.%llu.pb.gz", s->o->dir, (unsigned long long)seq)
                : snprintf(dst, cap, "%s/heap.%ld.%llu.pb.gz", s->o->dir, (long)pid,
                           (unsigned long long)seq);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Deletes entry i's files and counts them gone; the entry stays. */
static void unlink_entry(mpt_store *s, size_t i)
{
    char path[4200], peak[4300];
    if (name(s, s->v[i].pid, s->v[i].seq, path, sizeof path) == 0) {
        unlink(path);
        if (s->v[i].peak && mpt_peak_name(path, peak, sizeof peak) == 0)
            unlink(peak);
    }
    s->total -= s->v[i].bytes;
    s->removed++;
}

/* Deletes entry i's files and the entry. */
static void drop(mpt_store *s, size_t i)
{
    unlink_entry(s, i);
    memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

/* Which entries are their process's newest (no later entry of its pid),
 * as flags (malloc()ed; NULL: no memory): one pass from the newest back
 * over an open-addressing set of the pids seen. */
static bool *newest_flags(const mpt_store *s)
{
    size_t cap = 16;
    while (cap < 2 * s->n)
        cap *= 2;
    bool *last = malloc(s->n);
    pid_t *set = calloc(cap, sizeof *set); /* 0: empty (no process has pid 0) */
    if (last == NULL || set == NULL) {
        free(last);
        free(set);
        return NULL;
    }
    bool service = false; /* the service's windows (pid 0): one newest too */
    for (size_t i = s->n; i-- > 0;) {
        pid_t pid = s->v[i].pid;
        if (pid == 0) {
            last[i] = !service;
            service = true;
            continue;
        }
        size_t h = ((size_t)pid * 0x9E3779B97F4A7C15ull) & (cap - 1);
        while (set[h] != 0 && set[h] != pid)
            h = (h + 1) & (cap - 1);
        last[i] = set[h] == 0;
        set[h] = pid;
    }
    free(set);
    return last;
}

/* Drops the oldest entries that are not a running process's newest
 * (an ended process's newest may go) while the total is above `limit`.
 * Which entries are newest is known before any goes (an older entry of a
 * process going leaves its newest the newest), so one pass drops and
 * compacts: linear in the entries, also with thousands of processes of
 * one report each (a process per connection). Without memory for the
 * flags, nothing goes (the next report tries again). How many went. */
static size_t drop_oldest(mpt_store *s, uint64_t limit)
{
    if (s->total <= limit)
        return 0;
    bool *last = newest_flags(s);
    if (last == NULL)
        return 0;
    size_t gone = 0;
    /* First the processes' files, then the service's windows (pid 0):
     * the service's memory over time outlives its processes' files. */
    for (int service = 0; service < 2 && s->total > limit; service++) {
        size_t w = 0;
        for (size_t i = 0; i < s->n; i++) {
            bool may = (s->v[i].pid == 0) == (bool)service && (!last[i] || s->v[i].ended);
            if (s->total > limit && may) {
                unlink_entry(s, i);
                gone++;
            } else {
                s->v[w] = s->v[i];
                last[w++] = last[i];
            }
        }
        s->n = w;
    }
    free(last);
    return gone;
}

static void apply_cap(mpt_store *s)
{
    if (s->o->keep_bytes != 0)
        drop_oldest(s, s->o->keep_bytes);
}

void mpt_store_ended(mpt_store *s, pid_t pid)
{
    /* only its newest entry is protected: that one is marked */
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i].pid == pid) {
            s->v[i].ended = true;
            break;
        }
    apply_cap(s);
}

/* A full disk: room made by the rule's order (the oldest that are not a
 * running process's newest) for `need` bytes, before a newer report is
 * lost. Whether anything went. */
static bool make_room(mpt_store *s, uint64_t need)
{
    size_t gone = drop_oldest(s, s->total > need ? s->total - need : 0);
    s->roomed += (unsigned)gone;
    return gone > 0;
}

static bool disk_full(int e) { return e == ENOSPC || e == EDQUOT; }

/* mpt_out_write, making room on a full disk as long as something can go. */
static int write_file(mpt_store *s, const char *path, const uint8_t *buf, size_t len, char *why,
                      size_t whylen)
{
    for (;;) {
        if (mpt_out_write(path, buf, len, true, why, whylen) == 0)
            return 0;
        if (!disk_full(errno) || !make_room(s, len))
            return -1;
    }
}

void mpt_store_retain(mpt_store *s)
{
    if (s->n == 0)
        return;
    /* The process of the newest entry keeps its `keep` newest (the
     * service's windows go by the cap alone). */
    pid_t pid = s->v[s->n - 1].pid;
    if (s->o->keep > 0 && pid != 0) {
        size_t count = 0;
        for (size_t i = 0; i < s->n; i++)
            count += s->v[i].pid == pid;
        for (size_t i = 0; i < s->n && count > s->o->keep;) {
            if (s->v[i].pid == pid) {
                drop(s, i);
                count--;
            } else {
                i++;
            }
        }
    }
    apply_cap(s);
}

/* Writes entry (pid, seq) and its peak, then applies the rule. */
static int put(mpt_store *s, pid_t pid, uint64_t seq, const uint8_t *buf, size_t len,
               const uint8_t *pk, size_t pklen, char *why, size_t whylen)
{
    char path[4200], peak[4300];
    if (name(s, pid, seq, path, sizeof path) != 0) {
        snprintf(why, whylen, "report path too long");
        s->failed++;
        return -1;
    }
    if (write_file(s, path, buf, len, why, whylen) != 0) {
        s->failed++;
        return -1;
    }
    mpt_kept k = {.pid = pid, .seq = seq, .bytes = file_size(path)};
    if (pk != NULL && mpt_peak_name(path, peak, sizeof peak) == 0) {
        if (write_file(s, peak, pk, pklen, why, whylen) == 0) {
            k.peak = true;
            k.bytes += file_size(peak);
        }
    }
    s->written++;
    /* The same name again (cannot happen from one process; defensive)
     * replaces its entry. */
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].pid == pid && s->v[i].seq == seq) {
            s->total -= s->v[i].bytes;
            memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof *s->v);
            s->n--;
            break;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        mpt_kept *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL) {
            /* Kept on disk, not under the rule: say so, never delete blindly. */
            snprintf(why, whylen, "out of memory: %s is not under the retention rule", path);
            return -1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = k;
    s->total += k.bytes;
    mpt_store_retain(s);
    return 0;
}

int mpt_store_write(mpt_store *s, pid_t pid, unsigned seq, const uint8_t *buf, size_t len,
                    const uint8_t *pk, size_t pklen, char *why, size_t whylen)
{
    if (pid == 0) {
        snprintf(why, whylen, "no process has pid 0");
        s->failed++;
        return -1;
    }
    return put(s, pid, seq, buf, len, pk, pklen, why, whylen);
}

int mpt_store_write_window(mpt_store *s, uint64_t end_ms, const uint8_t *buf, size_t len,
                           const uint8_t *pk, size_t pklen, char *why, size_t whylen)
{
    return put(s, 0, end_ms, buf, len, pk, pklen, why, whylen);
}
