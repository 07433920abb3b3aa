/* SPDX-License-Identifier: MIT */
/* Internal declarations of the profiling core (not installed).
 *
 * Modules, one concept each:
 *   sampler.c   per-thread state, countdown, RNG, recursion guard, the
 *               template's hook entry points, stack capture
 *   recorder.c  thread rings, the registry, overflow shards, drains
 *   depot.c     interned stacks
 *   live.c      the live table and the free-path filter
 *   session.c   the process recorder: start / report / stop, fork,
 *               diagnostics
 *   aggregate.c per-stack sums for one report
 *   peak.c      the live estimate and each window's peak set (peak.h);
 *               peak_report.c encodes it (mp_profiler_report_peak),
 *               peak_comments.c says its size and time
 *   age.c       age buckets of live samples (the `age` label)
 *   reconcile.c a report's memory reconciliation with RSS (its comments),
 *               the allocator statistics hook
 *   unwind_fast.c  the stack walk: cached frame rules, libunwind behind
 *   unwind_nofd.c  libunwind's memory validation without a descriptor
 *   fastmath.h  the sampling path's inline log and estimator weight
 *   lock.h      the futex lock of the stripes and rings
 *   heap_image.c  mp_profiler_write_image: snapshot, image heap, write
 *   heap_image_read.c, heap_image_pprof.c, heap_image_schema.c
 *               reading heap images back, offline pprof (heap_image.h)
 *
 * Lock order (outermost first); a thread never takes an earlier lock while
 * holding a later one:
 *   g_rec.session   (start, stop, report, heap image, fork prepare)
 *   g_rec.rw        (shared: sampling hits, thread exit; exclusive:
 *                    start, stop, a heap image's quiet point, fork prepare)
 *   registry lock -> one ring lock -> one shard lock
 *   one depot stripe | one live stripe (never nested with each other)
 *   one live stripe -> the peak lock (peak.c; also taken alone)
 * Frees of sampled blocks (mp_prof_hook_forget*) hold g_rec.rw shared
 * too, so the fork prepare handler's exclusive hold excludes every other
 * holder of an inner lock.
 * Every code path that takes any of these runs under the thread's
 * recursion guard, so allocations made while holding them are never
 * sampled and never consult the live table.
 */
#ifndef MIMPROF_PROFILING_INTERNAL_H
#define MIMPROF_PROFILING_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#include "lock.h"
#include "ring.h"
#include "rwlock.h"

/* Frames captured beyond max_stack_depth, so that profiler frames cut from
 * the top still leave max_stack_depth application frames. */
#define MP_CAPTURE_SLACK 16u
/* Countdown while no session runs: a thread notices a new session within
 * this many bytes of allocation. No RNG draw, no sampling. */
#define MP_IDLE_COUNTDOWN ((uint64_t)64 << 10)
/* Largest countdown ever drawn (keeps the arithmetic far from wrapping). */
#define MP_MAX_COUNTDOWN ((uint64_t)1 << 62)

/* ---------------------------------------------------------------- stacks */

typedef struct mp_stack {
    struct mp_stack *next; /* depot chain */
    uint64_t hash;
    uint32_t depth;
    uint32_t truncated;
    uintptr_t pcs[]; /* pcs[0] = innermost application frame */
} mp_stack;

void mp_depot_init(void);
/* Interns a stack; NULL on out-of-memory. Caller holds g_rec.rw shared. */
const mp_stack *mp_depot_intern(const uintptr_t *pcs, uint32_t depth, bool truncated);
/* Frees every stack. Caller holds g_rec.rw exclusive. */
void mp_depot_clear(void);
uint64_t mp_depot_count(void);
/* Bytes of the stacks held (their allocations). */
uint64_t mp_depot_bytes(void);

/* ------------------------------------------------------------ live table */

void mp_live_init(void);
/* Inserts (or replaces) the entry of `p`, sampled at mp_now_nanos() `born`.
 * False when the table is full. */
bool mp_live_insert(uintptr_t p, const mp_stack *stack, uint64_t size, double weight, uint64_t gen,
                    uint64_t born);
/* Removes the entry of `p` if any (and if `id` is 0 or equals its id). */
void mp_live_remove(uintptr_t p, uint64_t id);
/* The id of the entry of `p`, 0 if none. */
uint64_t mp_live_id(uintptr_t p);
/* Calls fn for every entry of generation `gen`, one stripe locked at a time. */
typedef void (*mp_live_visit_fn)(void *ctx, const mp_stack *stack, uint64_t size, double weight,
                                 uint64_t born);
void mp_live_visit(uint64_t gen, mp_live_visit_fn fn, void *ctx);
/* Empties the table and the filter. Caller holds g_rec.rw exclusive. */
void mp_live_clear(void);
/* A session starting in a fork child adopts the entries the child
 * inherited (its parent's session's, still live here): every entry in the
 * table takes generation `gen`. Caller holds g_rec.rw exclusive. */
void mp_live_adopt(uint64_t gen);

/* A live entry as a heap-image snapshot holds it. */
typedef struct mp_live_sample {
    const mp_stack *stack;
    uint64_t size;
    double weight;
    uint64_t gen;
    uint64_t born; /* mp_now_nanos() when sampled */
} mp_live_sample;
/* Snapshot of the entries of generation `gen` as they are now, without
 * holding the table still while it is copied (see live.c). Begin: the
 * caller holds g_rec.session and g_rec.rw exclusive (the instant); false
 * on out-of-memory. Collect: after releasing rw, once per begin, with
 * g_rec.session still held; returns the entries (malloc()ed, in stripe
 * and slot order, as mp_live_visit visits them) and their number, and the
 * longest a stripe stayed locked for its copy. */
bool mp_live_snap_begin(uint64_t gen);
size_t mp_live_snap_collect(mp_live_sample **out, uint64_t *max_copy_ns);
void mp_live_set_limit(size_t max_entries);
uint64_t mp_live_count(void);
/* Bytes the table holds (slots and filter counts), one stripe locked at a time. */
uint64_t mp_live_bytes(void);

/* ------------------------------------------------------------- recorder */

/* A thread's recording state for one session, owned by the thread; its
 * ring is visible to reports once registered. */
typedef struct mp_thread_rec {
    mp_lock lock; /* guards ring */
    mp_fifo ring;
    uint64_t gen;               /* session this record belongs to */
    bool registered;            /* linked into the registry */
    struct mp_thread_rec *next; /* registry list (under the registry lock) */
    struct mp_thread_rec **prev;
    unsigned ordinal; /* order of this thread's first hit in the session */
    unsigned home_shard;
    uintptr_t *pcs; /* capture buffer: max_stack_depth + MP_CAPTURE_SLACK */
    /* The stack of this thread's last sample (sampler.c): a sample from
     * the same stack takes it without the depot's hash, lock and chain.
     * Valid for the record's session (the depot is cleared only at its
     * end, under rw exclusive); read and set under rw shared. */
    const struct mp_stack *last_stack;
    /* While last_n > 0, pcs[0..last_n) are the frames last_stack was made
     * from, from pcs[last_skip] on (sampler.c): a walk that finds each of
     * its frames already in its slot has that stack. */
    int last_n;
    uint32_t last_skip;
} mp_thread_rec;

/* Once per process, before the first session: locks of the recorder. */
void mp_rec_init(void);
/* In a fork child: frees the registered records of the threads that do
 * not exist there (all but `keep`, the forking thread's). */
void mp_rec_fork_child_release(mp_thread_rec *keep);
/* fork() handlers' part: the registry lock held across fork(). */
void mp_rec_fork_prepare(void);
void mp_rec_fork_parent(void);
void mp_rec_fork_child(void);

/* Allocates a thread record for the current session (under rw shared). */
mp_thread_rec *mp_rec_thread_new(uint64_t gen, unsigned ordinal, size_t ring_capacity,
                                 unsigned depth_capacity);
void mp_rec_thread_free(mp_thread_rec *t);
/* Frees a record whose session ended, safely against that session's
 * registry walk (takes the registry lock). */
void mp_rec_thread_release(mp_thread_rec *t);
/* Tries to register `t` (trylock). False on contention. */
bool mp_rec_register(mp_thread_rec *t);
/* Appends a record to t's ring, handing the ring to the overflow shards
 * when it is full. False when both are full (counted by the caller). */
bool mp_rec_push(mp_thread_rec *t, const mp_record *r);
/* Thread exit: hands t's records to the shards and unregisters it.
 * Returns the number of records that did not fit (lost). */
uint64_t mp_rec_thread_exit(mp_thread_rec *t);

/* Session lifetime of the recorder (rw exclusive held by the caller).
 * Each shard holds at most `shard_stacks` distinct stacks. */
bool mp_rec_session_begin(size_t shards, size_t shard_stacks);
/* Discards every pending record and unregisters every ring; returns the
 * number of records discarded. */
uint64_t mp_rec_session_end(void);

/* Drains up to `budget` records with fair shares between every registered
 * ring and every shard, calling fn (outside the source's lock) on each
 * ring record and on each shard entry: `records` records of `stack`
 * standing for `objects` objects and `bytes` bytes. A shard entry may
 * exceed the budget's remainder (it is taken whole, at least one per
 * round). Returns the records consumed. */
typedef void (*mp_drain_fn)(void *ctx, const mp_stack *stack, double objects, double bytes,
                            uint64_t records);
uint64_t mp_rec_drain(uint64_t budget, mp_drain_fn fn, void *ctx);
/* Calls fn on every record waiting in a registered ring (oldest first) and
 * on every overflow-shard entry, consuming nothing; fn runs under the
 * source's lock and must take no profiler lock. Caller holds g_rec.session
 * and g_rec.rw exclusive (nothing moves meanwhile). */
void mp_rec_peek(mp_drain_fn fn, void *ctx);

/* --------------------------------------------------------------- sampler */

/* The process-wide sampling state read by hooks. */
typedef struct mp_session_cfg {
    uint64_t gen;    /* 0 = no session */
    double interval; /* R, bytes */
    unsigned max_depth;
    size_t ring_capacity;
    uint64_t seed;
} mp_session_cfg;

/* The recursion guard: while held, this thread's allocations are not
 * sampled and its frees do not consult the live table. The countdown is
 * saved on entry and restored on exit, so profiler-internal allocations
 * do not consume the application's sampling interval. */
void mp_guard_enter(void);
void mp_guard_exit(void);

/* Resets the calling thread's sampling state for the current session
 * (session start does it for its own thread, so that its very next bytes
 * are sampled at the new rate). */
void mp_sampler_reset_current_thread(void);
/* Once per process, before the first session: the thread-exit key. */
void mp_sampler_global_init(void);
/* The calling thread's record (fork child: the one to keep). */
mp_thread_rec *mp_sampler_current_rec(void);
/* Warm-up: the unwinder's first call may allocate; done at session start. */
void mp_sampler_warm_up(void);
/* Gives the unwinder a memory validator that needs no file descriptor
 * (unwind_nofd.c); idempotent; before the first capture. */
void mp_unwind_nofd_install(void);
bool mp_sampler_observed(void);
/* fork() against stack capture (sampler.c, "fork vs. capture"): the
 * prepare handler's first step waits until no other thread is inside a
 * capture (and makes captures that start meanwhile skip their walk); the
 * parent's and the child's handlers end that. */
void mp_sampler_fork_prepare(void);
void mp_sampler_fork_parent(void);
void mp_sampler_fork_child(void);
/* Fault injection for tests: when set, called inside every capture's
 * walk, where libunwind and dl_iterate_phdr run (test_fork.c puts a
 * thread there at fork()). NULL in production: one load on the sampled
 * path. */
extern void (*mp_sampler_capture_probe)(void);

/* ---------------------------------------------------------------- session */

struct mp_counters {
    _Atomic uint64_t taken;
    _Atomic uint64_t reported;
    _Atomic uint64_t dropped_registration;
    _Atomic uint64_t dropped_teardown;
    _Atomic uint64_t dropped_overflow_full;
    _Atomic uint64_t dropped_live_table_full;
    _Atomic uint64_t discarded;
    _Atomic uint64_t ring_records;
    _Atomic uint64_t overflow_records;
    _Atomic uint64_t registered_threads;
    _Atomic uint64_t last_report_nanos;
    _Atomic uint64_t symbol_bytes;
    _Atomic int last_symbol_quality;
};

struct mp_recorder {
    pthread_mutex_t session;     /* start/stop/report serialization */
    mp_rwlock rw;                /* hooks (shared) vs start/stop/fork (exclusive) */
    _Atomic uint64_t active_gen; /* 0 = no session; written under rw exclusive */
    mp_session_cfg cfg;          /* written under rw exclusive */
    uint64_t gen_counter;        /* under session */
    _Atomic unsigned next_ordinal;
    mp_profiler *owner; /* under session */
    _Atomic int observed;
    struct mp_counters c;
};

extern struct mp_recorder g_rec;

#define MP_COUNT(field, n)   atomic_fetch_add_explicit(&g_rec.c.field, (n), memory_order_relaxed)
#define MP_UNCOUNT(field, n) atomic_fetch_sub_explicit(&g_rec.c.field, (n), memory_order_relaxed)

/* The estimator: for requested size S and interval R, the probability that
 * an allocation of S bytes is sampled, and the weight (objects) it stands
 * for. S >= 1 whenever a sample is taken. */
double mp_estimator_weight(uint64_t size, double interval);

uint64_t mp_now_nanos(void);
uint64_t mp_wall_nanos(void);

#endif
