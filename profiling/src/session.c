/* SPDX-License-Identifier: MIT */
/* The process recorder and its one session: start / report / stop / free,
 * fork handling, diagnostics and status strings.
 *
 * Ownership. g_rec.owner is the running session's handle and
 * g_rec.active_gen its generation (0 when none). A handle remembers its
 * generation; every call checks both, under g_rec.session, so a stopped
 * (or forked-away) handle can never stop, drain or clear a later session,
 * even one whose handle happens to reuse its address.
 *
 * fork(). The prepare handler waits until no other thread is inside a
 * stack capture (the unwinder's and the loader's locks), then takes
 * g_rec.session, g_rec.rw exclusively and the thread registry, which
 * excludes every other profiler lock holder (all take one of them first),
 * so the child inherits no locked profiler lock and no unwinder lock. In the child the
 * parent's session is ended: its pending records are released, the
 * inherited handle answers MP_PROF_E_INACTIVE (stop and free on it are
 * safe), the recorder is free for a new mp_profiler_start(), and the
 * sampling allocator keeps working (idle until a new session).
 *
 * The live entries are kept: the blocks they describe are live in the
 * child too (copies of the parent's), and the child's frees remove them
 * as in any process (the free path consults the table with or without a
 * session). So the table stays exact while no session runs, and the next
 * session started in the child adopts every entry (mp_live_adopt: only a
 * fork child's table holds entries when a session starts, since a stop
 * clears it), with its stack (the depot is kept with it) and its
 * allocation time; what the child allocates is its own. The peak keeps
 * its estimate and event count (the entries' event numbers stay unique)
 * and starts a new window. mp_profiler_drop_inherited releases them. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mimprof/sampling.h>

#include "age.h"
#include "aggregate.h"
#include "internal.h"
#include "peak.h"
#include "reconcile.h"
#include "report_builder.h"
#include "self_frames.h"
#include "session.h"
#include "unwind_fast.h"

struct mp_recorder g_rec = {
    .session = PTHREAD_MUTEX_INITIALIZER,
    .rw = MP_RWLOCK_INIT,
    .c = {.last_symbol_quality = -1},
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_warm;

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);

static void global_init(void)
{
    mp_depot_init();
    mp_live_init();
    mp_rec_init();
    mp_sampler_global_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ----------------------------------------------------------------- config */

void mp_prof_config_init(mp_prof_config *cfg)
{
    *cfg = (mp_prof_config){
        .sample_interval_bytes = 512u << 10,
        .max_stack_depth = 64,
        .ring_capacity = 256,
        .max_live_samples = (size_t)1 << 20,
        .seed = 0,
        /* Function names by default: `lines` reads DWARF line tables (libdw
         * inflates libc's compressed DWARF: ~215M instructions, 0.1-0.8 s at
         * the first report), a tax on every process; it is opt-in. */
        .symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS,
        .overflow_stacks = 65536,
        .report_max_records = (size_t)1 << 24,
    };
}

static bool config_valid(const mp_prof_config *c)
{
    return c->sample_interval_bytes >= 1 && c->sample_interval_bytes <= MP_PROF_MAX_INTERVAL &&
           c->max_stack_depth >= 1 && c->max_stack_depth <= MP_PROF_MAX_STACK_DEPTH &&
           c->ring_capacity >= 1 && c->ring_capacity <= MP_PROF_MAX_RING &&
           c->max_live_samples >= 1 && c->overflow_stacks >= 1 &&
           c->overflow_stacks <= MP_PROF_MAX_OVERFLOW && c->report_max_records >= 1 &&
           (c->symbolize == MP_PROF_SYMBOLIZE_NONE || c->symbolize == MP_PROF_SYMBOLIZE_FUNCTIONS ||
            c->symbolize == MP_PROF_SYMBOLIZE_LINES);
}

/* ---------------------------------------------------------------- session */

static unsigned shard_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 16)
        n = 16;
    return (unsigned)n;
}

/* Ends the running session's ownership and discards its pending
 * records; caller holds g_rec.session and g_rec.rw exclusively. The live
 * table and the stacks are the caller's to keep (fork) or clear. */
static void end_ownership_locked(void)
{
    atomic_store_explicit(&g_rec.active_gen, 0, memory_order_release);
    g_rec.cfg.gen = 0;
    g_rec.owner = NULL;
    uint64_t discarded = mp_rec_session_end();
    if (discarded != 0)
        MP_COUNT(discarded, discarded);
}

/* Ends the running session; caller holds g_rec.session and g_rec.rw
 * exclusively. */
static void end_session_locked(void)
{
    end_ownership_locked();
    mp_live_clear();
    mp_depot_clear();
}

mp_prof_status mp_profiler_start(const mp_prof_config *cfg, mp_profiler **out)
{
    mp_prof_config c;
    if (cfg == NULL)
        mp_prof_config_init(&c);
    else
        c = *cfg;
    if (out == NULL || !config_valid(&c))
        return MP_PROF_E_INVALID_CONFIG;
#if !MP_HAVE_LIBDW
    /* file:line needs DWARF through libdw (ELF backend, `libdw` feature):
     * refused, never silently degraded to function names. */
    if (c.symbolize == MP_PROF_SYMBOLIZE_LINES)
        return MP_PROF_E_UNSUPPORTED;
#endif
    if (!mp_sampler_observed())
        return MP_PROF_E_ALLOCATOR_NOT_OBSERVED;
    pthread_once(&g_once, global_init);

    mp_prof_status st = MP_PROF_OK;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (g_rec.owner != NULL) {
        st = MP_PROF_E_BUSY;
        goto unlock;
    }
    mp_profiler *p = calloc(1, sizeof *p);
    if (p == NULL) {
        st = MP_PROF_E_NOMEM;
        goto unlock;
    }
    if (!g_warm) { /* the unwinder's first call may allocate and take locks */
        mp_sampler_warm_up();
        g_warm = true;
    }
    mp_self_frames_init();

    unsigned nshards = shard_count();
    size_t per_shard = (c.overflow_stacks + nshards - 1) / nshards;
    mp_rw_wrlock(&g_rec.rw);
    if (!mp_rec_session_begin(nshards, per_shard)) {
        mp_rw_wrunlock(&g_rec.rw);
        free(p);
        st = MP_PROF_E_NOMEM;
        goto unlock;
    }
    uint64_t gen = ++g_rec.gen_counter;
    if (mp_live_count() != 0) /* a fork child's inheritance (see the top) */
        mp_live_adopt(gen);
    g_rec.cfg = (mp_session_cfg){
        .gen = gen,
        .interval = (double)c.sample_interval_bytes,
        .max_depth = c.max_stack_depth,
        .ring_capacity = c.ring_capacity,
        .seed = c.seed,
    };
    mp_live_set_limit(c.max_live_samples);
    atomic_store_explicit(&g_rec.next_ordinal, 0, memory_order_relaxed);
    g_rec.owner = p;
    atomic_store_explicit(&g_rec.active_gen, gen, memory_order_release);
    mp_rw_wrunlock(&g_rec.rw);

    p->gen = gen;
    p->cfg = c;
    p->interval_start_wall = mp_wall_nanos();
    *out = p;
unlock:
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    if (st == MP_PROF_OK) /* this thread samples at the new rate from its next byte */
        mp_sampler_reset_current_thread();
    return st;
}

bool mp_session_owns_locked(const mp_profiler *p)
{
    return !p->stopped && g_rec.owner == p &&
           atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) == p->gen;
}

static void drop_notes(mp_profiler *p)
{
    for (unsigned i = 0; i < p->nnotes; i++)
        free(p->notes[i]);
    p->nnotes = 0;
}

mp_prof_status mp_profiler_annotate(mp_profiler *p, const char *comment)
{
    if (p == NULL || comment == NULL || strlen(comment) > 1024)
        return MP_PROF_E_INVALID_CONFIG;
    mp_prof_status st = MP_PROF_OK;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (!mp_session_owns_locked(p))
        st = MP_PROF_E_INACTIVE;
    else if (p->nnotes == MP_PROF_MAX_NOTES)
        st = MP_PROF_E_INVALID_CONFIG;
    else if ((p->notes[p->nnotes] = strdup(comment)) == NULL)
        st = MP_PROF_E_NOMEM;
    else
        p->nnotes++;
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
}

mp_prof_status mp_profiler_set_symbolize(mp_profiler *p, mp_prof_symbolize mode)
{
    if (p == NULL || (mode != MP_PROF_SYMBOLIZE_NONE && mode != MP_PROF_SYMBOLIZE_FUNCTIONS &&
                      mode != MP_PROF_SYMBOLIZE_LINES))
        return MP_PROF_E_INVALID_CONFIG;
#if !MP_HAVE_LIBDW
    if (mode == MP_PROF_SYMBOLIZE_LINES)
        return MP_PROF_E_UNSUPPORTED;
#endif
    mp_prof_status st = MP_PROF_OK;
    mp_guard_enter();
    /* Read by the reports (and their peaks) under the session lock. */
    pthread_mutex_lock(&g_rec.session);
    if (!mp_session_owns_locked(p))
        st = MP_PROF_E_INACTIVE;
    else
        p->cfg.symbolize = mode;
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
}

mp_prof_status mp_profiler_stop(mp_profiler *p)
{
    if (p == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (mp_session_owns_locked(p)) {
        mp_rw_wrlock(&g_rec.rw);
        end_session_locked();
        mp_rw_wrunlock(&g_rec.rw);
    }
    p->stopped = true;
    mp_agg_free(&p->peak); /* its stacks were the session's */
    drop_notes(p);
    if (p->cache != NULL) {
        mp_report_cache_free(p->cache);
        p->cache = NULL;
    }
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return MP_PROF_OK;
}

void mp_profiler_free(mp_profiler *p)
{
    if (p == NULL)
        return;
    mp_profiler_stop(p);
    mp_guard_enter();
    free(p);
    mp_guard_exit();
}

/* ----------------------------------------------------------------- report */

struct report_ctx {
    mp_agg agg;
    uint64_t records;
    uint64_t now; /* mp_now_nanos() of the report: the instant ages are measured at */
};

static void on_record(void *ctx, const mp_stack *stack, double objects, double bytes,
                      uint64_t records)
{
    struct report_ctx *rc = ctx;
    rc->records += records;
    mp_agg_add(&rc->agg, stack, false, MP_AGE_NONE, objects, bytes);
}

static void on_live(void *ctx, const mp_stack *s, uint64_t size, double weight, uint64_t born)
{
    struct report_ctx *rc = ctx;
    uint64_t age = rc->now > born ? rc->now - born : 0;
    mp_agg_add(&rc->agg, s, true, mp_age_bucket(age), weight, weight * (double)size);
}

static mp_prof_status encode(mp_profiler *p, struct report_ctx *rc, uint64_t now_wall,
                             uint8_t **out, size_t *len)
{
    if (p->cache == NULL && (p->cache = mp_report_cache_new()) == NULL)
        return MP_PROF_E_NOMEM;
    mp_report_options opt = {
        .period = p->cfg.sample_interval_bytes,
        .time_nanos = (int64_t)p->interval_start_wall,
        .duration_nanos = (int64_t)(now_wall - p->interval_start_wall),
        .symbolize = p->cfg.symbolize,
    };
    mp_report_builder *b = mp_report_begin(p->cache, &opt);
    if (b == NULL)
        return MP_PROF_E_NOMEM;
    for (unsigned i = 0; i < p->nnotes; i++) {
        mp_prof_status st = mp_report_comment(b, p->notes[i]);
        if (st != MP_PROF_OK) {
            mp_report_abort(b);
            return st;
        }
    }
    double live_bytes = 0;
    for (size_t i = 0; i < rc->agg.count; i++)
        live_bytes += rc->agg.e[i].v[MP_VAL_INUSE_SPACE];
    mp_reconcile memory;
    mp_reconcile_gather(p, live_bytes, &memory);
    mp_prof_status cst = mp_reconcile_comment(b, &memory, p->stats_name);
    if (cst != MP_PROF_OK) {
        mp_report_abort(b);
        return cst;
    }
    for (size_t i = 0; i < rc->agg.count; i++) {
        const mp_agg_entry *e = &rc->agg.e[i];
        mp_prof_status st = MP_PROF_OK;
        if (e->n_interval != 0) {
            double v[MP_VAL_COUNT] = {e->v[MP_VAL_ALLOC_OBJECTS], e->v[MP_VAL_ALLOC_SPACE], 0, 0};
            st =
                mp_report_add(b, e->stack->pcs, e->stack->depth, e->stack->truncated != 0, v, true);
        }
        if (st == MP_PROF_OK && e->n_live != 0) {
            double v[MP_VAL_COUNT] = {0, 0, e->v[MP_VAL_INUSE_OBJECTS], e->v[MP_VAL_INUSE_SPACE]};
            st = mp_report_add_aged(b, e->stack->pcs, e->stack->depth, e->stack->truncated != 0, v,
                                    false, e->bucket);
        }
        if (st != MP_PROF_OK) {
            mp_report_abort(b);
            return st;
        }
    }
    return mp_report_finish(b, out, len);
}

mp_prof_status mp_profiler_report(mp_profiler *p, uint8_t **pprof, size_t *len)
{
    if (p == NULL || pprof == NULL || len == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_prof_status st;
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (!mp_session_owns_locked(p)) {
        st = MP_PROF_E_INACTIVE;
        goto unlock;
    }
    uint64_t t0 = mp_now_nanos();
    uint64_t now_wall = mp_wall_nanos();
    struct report_ctx rc = {{0}, 0, t0};
    mp_rec_drain(p->cfg.report_max_records, on_record, &rc);
    mp_live_visit(p->gen, on_live, &rc);
    /* The same instant ends the window of the peak (peak.c). */
    mp_agg peak = {0};
    mp_peak_result pr;
    bool peak_whole = mp_peak_close(p->gen, &peak, &pr);
    mp_agg_free(&p->peak);
    p->peak = peak;
    p->peak_info = (mp_prof_peak_info){
        .bytes = pr.bytes < 0.5 ? 0 : (uint64_t)(pr.bytes + 0.5),
        .objects = pr.objects < 0.5 ? 0 : (uint64_t)(pr.objects + 0.5),
        .time_nanos = (int64_t)pr.wall_ns,
        .window_start_nanos = (int64_t)p->interval_start_wall,
        .window_end_nanos = (int64_t)now_wall,
        .samples = pr.samples,
        .incomplete = pr.incomplete || !peak_whole,
    };
    if (rc.agg.oom)
        st = MP_PROF_E_NOMEM;
    else
        st = encode(p, &rc, now_wall, pprof, len);
    mp_agg_free(&rc.agg);
    if (st == MP_PROF_OK) {
        drop_notes(p);
        MP_COUNT(reported, rc.records);
        p->interval_start_wall = now_wall;
        atomic_store_explicit(&g_rec.c.last_symbol_quality, mp_report_cache_last_quality(p->cache),
                              memory_order_relaxed);
        atomic_store_explicit(&g_rec.c.symbol_bytes, mp_report_cache_symbol_bytes(p->cache),
                              memory_order_relaxed);
    } else {
        MP_COUNT(discarded, rc.records); /* consumed but not delivered */
    }
    atomic_store_explicit(&g_rec.c.last_report_nanos, mp_now_nanos() - t0, memory_order_relaxed);
unlock:
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
}

void mp_prof_buffer_free(uint8_t *pprof)
{
    mp_guard_enter();
    free(pprof);
    mp_guard_exit();
}

/* ------------------------------------------------------------------- fork */

/* No capture first (it takes no profiler lock, and holds locks of
 * libunwind and of the loader: sampler.c, "fork vs. capture"), then the
 * session, the recorder's lock and the thread registry, in the order
 * every other holder takes them. */
static void fork_prepare(void)
{
    mp_guard_enter();
    mp_sampler_fork_prepare();
    pthread_mutex_lock(&g_rec.session);
    mp_rw_fork_prepare(&g_rec.rw);
    mp_rec_fork_prepare();
}

static void fork_parent(void)
{
    mp_rec_fork_parent();
    mp_rw_fork_parent(&g_rec.rw);
    pthread_mutex_unlock(&g_rec.session);
    mp_sampler_fork_parent();
    mp_guard_exit();
}

/* Ends the parent's session in the child and keeps its live entries (see
 * the top). */
static void fork_child(void)
{
    mp_sampler_fork_child();
    mp_rec_fork_child();
    mp_rw_fork_child(&g_rec.rw);
    mp_unwind_fast_fork_child();
    if (g_rec.owner != NULL || atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) != 0) {
        mp_rec_fork_child_release(mp_sampler_current_rec());
        end_ownership_locked();
        mp_peak_fork_child();
    }
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
}

void mp_profiler_drop_inherited(void)
{
    if (mp_live_count() == 0)
        return; /* nothing inherited (or already released) */
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    if (g_rec.owner == NULL && mp_live_count() != 0) {
        mp_rw_wrlock(&g_rec.rw);
        mp_live_clear();
        mp_depot_clear();
        mp_rw_wrunlock(&g_rec.rw);
    }
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
}

/* ------------------------------------------------------------ diagnostics */

#define LOAD(field) atomic_load_explicit(&g_rec.c.field, memory_order_relaxed)

void mp_prof_diagnostics(mp_prof_stats *out)
{
    if (out == NULL)
        return;
    *out = (mp_prof_stats){
        .samples_taken = LOAD(taken),
        .samples_reported = LOAD(reported),
        .dropped_registration = LOAD(dropped_registration),
        .dropped_teardown = LOAD(dropped_teardown),
        .dropped_overflow_full = LOAD(dropped_overflow_full),
        .dropped_live_table_full = LOAD(dropped_live_table_full),
        .ring_records = LOAD(ring_records),
        .overflow_records = LOAD(overflow_records),
        .live_samples = mp_live_count(),
        .registered_threads = LOAD(registered_threads),
        .last_report_nanos = LOAD(last_report_nanos),
        .symbol_bytes = LOAD(symbol_bytes),
        .last_symbol_quality = LOAD(last_symbol_quality),
        .records_discarded = LOAD(discarded),
        .stacks = mp_depot_count(),
        .active = atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) != 0,
        .allocator_observed = mp_sampler_observed(),
    };
}

/* ------------------------------------------------------------------- misc */

const char *mp_prof_strerror(mp_prof_status s)
{
    switch (s) {
    case MP_PROF_OK:
        return "success";
    case MP_PROF_E_INVALID_CONFIG:
        return "invalid configuration or argument";
    case MP_PROF_E_ALLOCATOR_NOT_OBSERVED:
        return "no sampling allocator has served an allocation in this process";
    case MP_PROF_E_BUSY:
        return "another profiling session owns the process recorder";
    case MP_PROF_E_INACTIVE:
        return "the profiling session was stopped";
    case MP_PROF_E_NOMEM:
        return "out of memory";
    case MP_PROF_E_INTERNAL:
        return "internal error (a bug in mimprof-profiling)";
    case MP_PROF_E_IO:
        return "a file could not be read or written";
    case MP_PROF_E_UNSUPPORTED:
        return "not supported on this platform or build";
    case MP_PROF_E_BAD_IMAGE:
        return "not a heap image this version can read";
    case MP_PROF_E_NOT_MANGLED:
        return "not a mangled name";
    }
    return "unknown status";
}

const char *mp_prof_version(void) { return MP_PROF_PACKAGE_VERSION; }
