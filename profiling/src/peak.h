/* SPDX-License-Identifier: MIT */
/* The window's peak: the estimated live heap and the sampled live set at
 * its high-water mark, per report window (see peak.c). Internal. */
#ifndef MIMPROF_PROFILING_PEAK_H
#define MIMPROF_PROFILING_PEAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate.h"
#include "internal.h"
#include "lock.h"

/* A new high-water mark is recorded when the live estimate exceeds the
 * window's previous one by more than 1/2^MP_PEAK_STEP_SHIFT of it (1/64,
 * 1.6%): the recorded peak is within that step below the true maximum of
 * the estimate, and a window records at most log(max/start)/log(1+1/64)
 * marks beyond its first ones. */
#define MP_PEAK_STEP_SHIFT 6u

/* What the peak knows of a live-table entry: the head of live.c's entry,
 * passed to the removal by address so that only the rare part (keeping
 * it in the gone list) reads the stack and the pointer, and the removal
 * keeps no copy of them across its lock (BENCHMARKS.md). */
typedef struct mp_peak_ev {
    uintptr_t ptr;
    const mp_stack *stack;
    uint64_t size;
    double weight;
    uint64_t seq; /* the event of its insertion */
} mp_peak_ev;

/* The live table's hooks (live.c), called with the entry's stripe lock
 * held (lock order: stripe -> peak). Insert: an entry of `bytes`
 * (weight * size) became live; returns the event number to keep in the
 * entry. Remove: the entry (its pointer, stack, size, weight and the
 * event number insert returned, still in the table) is going. */
static inline uint64_t mp_peak_insert(double bytes);
static inline void mp_peak_remove(const mp_peak_ev *e);
/* The current event number (for the stripe visit of mp_peak_close). */
uint64_t mp_peak_seq(void);
/* Forgets everything: a new session's first window starts empty. Caller
 * holds g_rec.rw exclusive (no hook runs). */
void mp_peak_reset(void);
/* In a fork child whose live table is kept (session.c): the parent's
 * window is not the child's; the estimate and the event count stay (they
 * are the kept entries'), the child's first window starts at the live
 * set now. Single-threaded (the fork child handler). */
void mp_peak_fork_child(void);

/* live.c's side of a close: calls fn on every entry of generation `gen`
 * inserted at or before event `upto`, one stripe locked at a time, and
 * stores in visited[k] the event number current while stripe k was
 * visited (an entry of stripe k removed at or before it was not seen). */
#define MP_LIVE_STRIPES 64u
typedef void (*mp_live_peak_fn)(void *ctx, const mp_stack *stack, uint64_t size, double weight);
void mp_live_visit_upto(uint64_t gen, uint64_t upto, mp_live_peak_fn fn, void *ctx,
                        uint64_t visited[MP_LIVE_STRIPES]);
/* The stripe of pointer p. */
unsigned mp_live_stripe(uintptr_t p);

/* What mp_peak_close tells about the window it closed. */
typedef struct mp_peak_result {
    double bytes;     /* the live estimate at the high-water mark */
    double objects;   /* objects the peak set stands for */
    uint64_t wall_ns; /* CLOCK_REALTIME when it was reached */
    uint64_t samples; /* sampled blocks in the peak set */
    bool incomplete;  /* memory ran out keeping it: some blocks are missing */
} mp_peak_result;

/* Ends the current window and starts the next one (its first mark: the
 * live set now), and sums the closed window's peak set of generation
 * `gen` per stack into `agg` (in-use values). Caller holds g_rec.session
 * (one close at a time). False on out-of-memory (agg->oom). */
bool mp_peak_close(uint64_t gen, mp_agg *agg, mp_peak_result *out);
/* The same for the current window so far, which goes on (heap images). */
bool mp_peak_peek(uint64_t gen, mp_agg *agg, mp_peak_result *out);

/* The peak's comments ("peak: N bytes estimated live at <UTC>", ...)
 * into a report builder (peak_comments.c; heap images use them too). */
mp_prof_status mp_peak_comments(mp_report_builder *b, const mp_prof_peak_info *pi);

/* peak.c's state, here so that the two event hooks above inline into the
 * live table's insert and remove (one call, its spills and the argument
 * moves fewer each; BENCHMARKS.md, "One sample"). Only peak.c and these
 * hooks touch it, always under `lock`. */
typedef struct mp_peak_gone {
    mp_peak_ev e; /* e.seq: the event of its insertion */
    uint64_t rm;  /* the event of its removal */
} mp_peak_gone;

typedef struct mp_peak_state {
    mp_lock lock;       /* everything below */
    uint64_t seq;       /* events so far */
    double est;         /* live estimate, bytes */
    uint64_t mark;      /* the current window's high-water mark (an event) */
    double mark_bytes;  /* the estimate at it */
    double next_bytes;  /* the estimate above which the next mark is recorded */
    uint64_t mark_wall; /* CLOCK_REALTIME at it */
    bool hold;          /* a close in progress reads entries live at hold_mark */
    uint64_t hold_mark; /* <= mark: the mark when the close began, marks only grow */
    bool lost;          /* the gone list could not grow in this window */
    mp_peak_gone *v;
    size_t n, cap;
} mp_peak_state;

extern __attribute__((visibility("hidden"))) mp_peak_state mp_peak_st;
/* The rare parts, out of line (peak.c; under the lock). */
__attribute__((visibility("hidden"))) void mp_peak_mark_locked_(void);
__attribute__((visibility("hidden"))) void mp_peak_keep_gone_(const mp_peak_ev *e, uint64_t rm);

static inline uint64_t mp_peak_insert(double bytes)
{
    mp_lock_take(&mp_peak_st.lock);
    uint64_t seq = ++mp_peak_st.seq;
    mp_peak_st.est += bytes;
    if (__builtin_expect(mp_peak_st.est > mp_peak_st.next_bytes, 0))
        mp_peak_mark_locked_();
    mp_lock_release(&mp_peak_st.lock);
    return seq;
}

static inline void mp_peak_remove(const mp_peak_ev *e)
{
    mp_lock_take(&mp_peak_st.lock);
    uint64_t rm = ++mp_peak_st.seq;
    mp_peak_st.est -= e->weight * (double)(int64_t)e->size; /* size < 2^63 */
    /* needed() (peak.c): inserted at or before a mark it is removed after
     * (the current one, or the one a close holds, which is at or before
     * the current one); kept only then */
    if (__builtin_expect(e->seq <= mp_peak_st.mark, 0))
        mp_peak_keep_gone_(e, rm);
    mp_lock_release(&mp_peak_st.lock);
}

#endif
