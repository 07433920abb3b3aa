/* SPDX-License-Identifier: MIT */
/* The window's peak: the estimated live heap (the weighted sum that the
 * in-use values are made of) and, for each report window, the sampled
 * live set as it was at the window's high-water mark.
 *
 * Nothing is copied when a mark is reached. Every insertion into and
 * removal from the live table is an *event*, numbered under one lock
 * (g_peak.lock, taken inside the entry's stripe lock, so the number
 * orders each stripe's changes as the stripe saw them); the live estimate
 * changes by the entry's weight x size at the same event. A mark is an
 * event number: the set live at mark m is every entry inserted at or
 * before m and not removed at or before it. Entries still in the table
 * carry their insertion number (live.c); entries removed after the mark
 * that were live at it are kept here, in the *gone* list, with both
 * numbers. So a mark costs a counter, a clock read and a prune of the
 * gone list, never a copy of the table, and the peak set is rebuilt once,
 * when the report closes the window (mp_peak_close).
 *
 * Cost: one uncontended lock, an add and a compare per sampled allocation
 * and per free of a sampled block (the sample path only; unsampled
 * allocations and frees never get here); a removed entry that was live at
 * the mark is appended to the gone list (amortised O(1)). A new mark is
 * recorded only when the estimate exceeds the previous one by the step
 * MP_PEAK_STEP_SHIFT documents, and it prunes the gone list: every entry
 * in it was removed before the new mark, so it is emptied (except what a
 * close in progress still reads). The gone list thus holds at most the
 * entries live at the current mark (and, during a close, at the closed
 * one): it is bounded by the live table's own bound.
 *
 * Close (at each report, under g_rec.session): the window's mark P is
 * taken and the next window starts with the live set now as its first
 * mark, while `hold` keeps the gone entries P needs; the table is visited
 * stripe by stripe, counting entries inserted at or before P, and noting
 * for each stripe the event number current during its visit (V); then a
 * gone entry counts if it was live at P and removed at or before its
 * stripe's V (after V it was still in the table when the stripe was
 * visited, and counted there). Every entry live at P is thus counted
 * exactly once, whatever the other threads do meanwhile. */
#include <stdlib.h>

#include "age.h"
#include "peak.h"

mp_peak_state mp_peak_st = {.lock = MP_LOCK_INIT};
#define g_peak mp_peak_st
typedef mp_peak_gone gone;

/* Whether a gone entry can still be asked for: live at the current mark
 * (removed after it) or at the mark a close holds. */
static bool needed(const gone *g)
{
    if (g->e.seq <= g_peak.mark && g->rm > g_peak.mark)
        return true;
    return g_peak.hold && g->e.seq <= g_peak.hold_mark && g->rm > g_peak.hold_mark;
}

static void prune_locked(void)
{
    size_t k = 0;
    for (size_t i = 0; i < g_peak.n; i++)
        if (needed(&g_peak.v[i]))
            g_peak.v[k++] = g_peak.v[i];
    g_peak.n = k;
}

static void mark_locked(void)
{
    g_peak.mark = g_peak.seq;
    g_peak.mark_bytes = g_peak.est;
    g_peak.next_bytes = g_peak.est + g_peak.est / (double)(1u << MP_PEAK_STEP_SHIFT);
    g_peak.mark_wall = mp_wall_nanos();
    if (g_peak.n != 0)
        prune_locked();
}

void mp_peak_mark_locked_(void) { mark_locked(); }

/* The removal's rare part: p was live at a mark that can still be asked
 * for, so it goes to the gone list (called under the peak's lock). */
void mp_peak_keep_gone_(const mp_peak_ev *e, uint64_t rm)
{
    gone g = {*e, rm};
    if (g_peak.n == g_peak.cap) {
        size_t ncap = g_peak.cap ? g_peak.cap * 2 : 256;
        gone *nv = realloc(g_peak.v, ncap * sizeof *nv);
        if (nv != NULL) {
            g_peak.v = nv;
            g_peak.cap = ncap;
        }
    }
    if (g_peak.n < g_peak.cap)
        g_peak.v[g_peak.n++] = g;
    else
        g_peak.lost = true;
}

uint64_t mp_peak_seq(void)
{
    mp_lock_take(&g_peak.lock);
    uint64_t s = g_peak.seq;
    mp_lock_release(&g_peak.lock);
    return s;
}

void mp_peak_reset(void)
{
    mp_lock_take(&g_peak.lock);
    free(g_peak.v);
    g_peak.v = NULL;
    g_peak.n = g_peak.cap = 0;
    g_peak.seq = g_peak.mark = 0;
    g_peak.est = g_peak.mark_bytes = g_peak.next_bytes = 0;
    g_peak.mark_wall = mp_wall_nanos();
    g_peak.hold = g_peak.lost = false;
    mp_lock_release(&g_peak.lock);
}

void mp_peak_fork_child(void)
{
    mp_lock_take(&g_peak.lock);
    g_peak.n = 0; /* gone entries of the parent's window (their stacks stay in the depot) */
    g_peak.hold = g_peak.lost = false;
    mark_locked();
    mp_lock_release(&g_peak.lock);
}

struct close_ctx {
    mp_agg *agg;
    mp_peak_result *res;
};

static void add(struct close_ctx *c, const mp_stack *stack, uint64_t size, double weight)
{
    mp_agg_add(c->agg, stack, true, MP_AGE_NONE, weight, weight * (double)size);
    c->res->objects += weight;
    c->res->samples++;
}

static void on_entry(void *ctx, const mp_stack *stack, uint64_t size, double weight)
{
    add(ctx, stack, size, weight);
}

/* The set live at the current mark, summed into agg (see the header
 * comment); `close` also starts the next window. */
static bool rebuild(uint64_t gen, bool close, mp_agg *agg, mp_peak_result *out)
{
    *out = (mp_peak_result){0};
    mp_lock_take(&g_peak.lock);
    uint64_t mark = g_peak.mark;
    out->bytes = g_peak.mark_bytes;
    out->wall_ns = g_peak.mark_wall;
    out->incomplete = g_peak.lost;
    g_peak.hold = true;
    g_peak.hold_mark = mark;
    if (close) {
        g_peak.lost = false;
        mark_locked(); /* the next window's first mark: the live set now */
    }
    mp_lock_release(&g_peak.lock);

    struct close_ctx c = {agg, out};
    uint64_t visited[MP_LIVE_STRIPES];
    mp_live_visit_upto(gen, mark, on_entry, &c, visited);

    mp_lock_take(&g_peak.lock);
    for (size_t i = 0; i < g_peak.n; i++) {
        const gone *g = &g_peak.v[i];
        if (g->e.seq <= mark && g->rm > mark && g->rm <= visited[mp_live_stripe(g->e.ptr)])
            add(&c, g->e.stack, g->e.size, g->e.weight);
    }
    g_peak.hold = false;
    prune_locked();
    mp_lock_release(&g_peak.lock);
    return !agg->oom;
}

bool mp_peak_close(uint64_t gen, mp_agg *agg, mp_peak_result *out)
{
    return rebuild(gen, true, agg, out);
}

bool mp_peak_peek(uint64_t gen, mp_agg *agg, mp_peak_result *out)
{
    return rebuild(gen, false, agg, out);
}
