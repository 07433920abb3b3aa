/* SPDX-License-Identifier: MIT */
/* Reconciling a report with RSS: every report states, in its comments,
 * where the process's resident memory went (profiling/README.md,
 * "Reconciling with RSS", is the user's account of the same sums):
 *
 *   memory rss: R bytes                the process's resident set (/proc/self/statm)
 *   memory allocator: NAME k=v ...     the allocator's own figures (the stats hook)
 *   memory live heap: L bytes          estimated: the report's inuse_space
 *   memory profiler: P bytes           the profiler's own tables
 *   memory unexplained: U bytes        U = R - L - P
 *   memory unexplained = S + O         with the allocator's resident
 *                                      bytes A: the allocator's slack
 *                                      S = A - L - P and what lies
 *                                      outside it, O = R - A (>= 0)
 *
 * Only a resident figure splits U: committed memory is not resident
 * memory (mimalloc commits pages it never touches, and R - committed came
 * out at -29 MiB on the demo), so with a committed figure alone the
 * comment says that U is not split. The allocator's figures are read
 * before RSS, so that O, resident memory that is not the allocator's,
 * cannot fall below zero when the program grows between the two reads;
 * when it shrank between them (A > R by the pages released), A is taken
 * as R and the comment says so. S is signed: L is an estimate (its
 * tolerance is the estimator's, profiling/README.md), and blocks the
 * program has not written yet are live but not resident, so S can come
 * out below zero; a further comment then says why rather than clamp it.
 * The profiler's own memory counts the tables that
 * grow with the program (live table, stacks, thread records, symbol data);
 * in the preload they come from the same allocator as the program's
 * memory, which is why they are taken out of the allocator's slack (the
 * symbol data as the previous report left it: this one symbolizes after
 * its comments are written).
 *
 * Runs on the reporting thread under the session lock and the recursion
 * guard; reads /proc/self/statm through a close-on-exec descriptor open
 * only for the read (as the report side's ELF reads are). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "reconcile.h"

mp_prof_status mp_profiler_set_allocator_stats(mp_profiler *p, const char *allocator,
                                               mp_prof_allocator_stats_fn fn, void *ctx)
{
    if (p == NULL ||
        (fn != NULL && (allocator == NULL || strlen(allocator) >= sizeof p->stats_name)))
        return MP_PROF_E_INVALID_CONFIG;
    mp_prof_status st = MP_PROF_OK;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (!mp_session_owns_locked(p)) {
        st = MP_PROF_E_INACTIVE;
    } else {
        p->stats_fn = fn;
        p->stats_ctx = fn != NULL ? ctx : NULL;
        snprintf(p->stats_name, sizeof p->stats_name, "%s", fn != NULL ? allocator : "");
    }
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
}

/* Resident bytes of this process, MP_PROF_STAT_NONE where unknown. */
static uint64_t rss_bytes(void)
{
#ifdef __linux__
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return MP_PROF_STAT_NONE;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return MP_PROF_STAT_NONE;
    buf[n] = '\0';
    unsigned long long size, resident;
    long page = sysconf(_SC_PAGESIZE);
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2 || page <= 0)
        return MP_PROF_STAT_NONE;
    return (uint64_t)resident * (uint64_t)page;
#else
    return MP_PROF_STAT_NONE;
#endif
}

void mp_reconcile_gather(const mp_profiler *p, double live_bytes, mp_reconcile *out)
{
    *out = (mp_reconcile){0};
    out->alloc = (mp_prof_allocator_stats){MP_PROF_STAT_NONE, MP_PROF_STAT_NONE, MP_PROF_STAT_NONE,
                                           MP_PROF_STAT_NONE, MP_PROF_STAT_NONE, MP_PROF_STAT_NONE};
    if (p->stats_fn != NULL)
        out->have_alloc = p->stats_fn(p->stats_ctx, &out->alloc);
    out->rss = rss_bytes(); /* after the allocator's figures: see the head comment */
    out->live_heap = live_bytes > 0 ? (uint64_t)(live_bytes + 0.5) : 0;
    uint64_t threads = atomic_load_explicit(&g_rec.c.registered_threads, memory_order_relaxed);
    uint64_t per_thread = sizeof(mp_thread_rec) + p->cfg.ring_capacity * sizeof(mp_record) +
                          (p->cfg.max_stack_depth + MP_CAPTURE_SLACK) * sizeof(uintptr_t);
    out->profiler = mp_live_bytes() + mp_depot_bytes() + threads * per_thread +
                    mp_report_cache_symbol_bytes(p->cache);
}

/* "k=v" for each given figure of the allocator, into buf. */
static void alloc_figures(char *buf, size_t n, const mp_prof_allocator_stats *a)
{
    const struct {
        const char *name;
        uint64_t v;
    } f[] = {{"allocated", a->allocated}, {"active", a->active},       {"resident", a->resident},
             {"mapped", a->mapped},       {"committed", a->committed}, {"reserved", a->reserved}};
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof f / sizeof f[0] && at < n; i++)
        if (f[i].v != MP_PROF_STAT_NONE)
            at += (size_t)snprintf(buf + at, n - at, " %s=%" PRIu64, f[i].name, f[i].v);
}

/* The allocator's resident bytes, or MP_PROF_STAT_NONE. */
static uint64_t resident(const mp_reconcile *r)
{
    return r->have_alloc ? r->alloc.resident : MP_PROF_STAT_NONE;
}

mp_prof_status mp_reconcile_comment(mp_report_builder *b, const mp_reconcile *r,
                                    const char *allocator)
{
    char line[512], figs[384];
    mp_prof_status st;
#define EMIT(...)                                                                                  \
    do {                                                                                           \
        snprintf(line, sizeof line, __VA_ARGS__);                                                  \
        if ((st = mp_report_comment(b, line)) != MP_PROF_OK)                                       \
            return st;                                                                             \
    } while (0)
    if (r->rss != MP_PROF_STAT_NONE)
        EMIT("memory rss: %" PRIu64 " bytes (the process's resident set)", r->rss);
    else
        EMIT("memory rss: unknown on this platform");
    if (r->have_alloc) {
        alloc_figures(figs, sizeof figs, &r->alloc);
        EMIT("memory allocator: %s%s (bytes)", allocator, figs);
    } else {
        EMIT("memory allocator: no statistics");
    }
    EMIT("memory live heap: %" PRIu64 " bytes (estimated: the sum of inuse_space)", r->live_heap);
    EMIT("memory profiler: %" PRIu64 " bytes (live table, stacks, thread records, symbol data)",
         r->profiler);
    if (r->rss == MP_PROF_STAT_NONE)
        return MP_PROF_OK;
    int64_t rest = (int64_t)r->rss - (int64_t)r->live_heap - (int64_t)r->profiler;
    uint64_t a = resident(r);
    EMIT("memory unexplained: %" PRId64 " bytes = rss - live heap - profiler", rest);
    if (a == MP_PROF_STAT_NONE) {
        if (r->have_alloc)
            EMIT("memory unexplained not split: the allocator gives no resident figure "
                 "(committed memory is not resident memory)");
        return MP_PROF_OK;
    }
    if (a > r->rss) {
        EMIT("memory allocator resident %" PRIu64 " > rss: memory was released between the two "
             "reads; taken as rss",
             a);
        a = r->rss;
    }
    int64_t slack = (int64_t)a - (int64_t)r->live_heap - (int64_t)r->profiler;
    EMIT("memory unexplained = allocator slack %" PRId64 " (allocator resident - live heap - "
         "profiler) + outside the allocator %" PRIu64 " (rss - allocator resident)",
         slack, r->rss - a);
    if (slack < 0)
        EMIT("memory allocator slack below zero: the estimated live heap and the profiler exceed "
             "the allocator's resident bytes by %" PRId64 " (blocks not written yet are not "
             "resident; the estimate has its tolerance)",
             -slack);
#undef EMIT
    return MP_PROF_OK;
}
