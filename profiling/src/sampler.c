/* SPDX-License-Identifier: MIT */
/* The sampling side: per-thread state, the countdown and its RNG, the
 * recursion guard, stack capture, and the entry points the sampling
 * allocator template calls (mp_prof_hook_*).
 *
 * Countdown semantics. mp_prof_hook_countdown holds floor(X), X ~ Exp(R)
 * the distance in bytes from the current position to the next sample
 * point. An allocation of S bytes covers the point iff S > countdown (the
 * template's subtraction goes below zero); the probability of that is exactly
 * 1 - exp(-S/R). After a sampled allocation a fresh X is drawn from its end
 * (memorylessness: no loop over crossed intervals, one RNG draw per hit).
 *
 * Thread state lifecycle. A new thread's countdown is 0, so its first
 * allocation of a nonzero size goes below zero and lands here: the thread is
 * initialized (this is what "observed" means) and its countdown drawn.
 * When the session generation changes, the next hit re-initializes the
 * thread for the new session (fresh RNG stream, fresh countdown). While no
 * session runs the countdown is a fixed MP_IDLE_COUNTDOWN: no RNG draw, no
 * capture.
 *
 * Everything here that may run during a sampling hit is placed in the
 * `mimprof_hooks` section, so that captured stacks lose these frames by
 * address even if the library is linked statically. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h> /* Linux: getrandom; macOS: getentropy */
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#define MP_ENTROPY(p, n) (getrandom((p), (n), GRND_NONBLOCK) == (ssize_t)(n))
#else /* macOS, the BSDs */
#define MP_ENTROPY(p, n) (getentropy((p), (n)) == 0)
#endif

#if MP_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#else
#include <execinfo.h>
#endif

#include <mimprof/sampling.h>

#include "fastmath.h"
#include "internal.h"
#include "self_frames.h"
#include "unwind_fast.h"

#define HOOK MP_PROF_HOOK_SECTION_

__thread uint64_t mp_prof_hook_countdown __attribute__((tls_model("initial-exec")));

typedef struct tstate {
    mp_thread_rec *rec;   /* this thread's record for session `gen` (or stale) */
    uint64_t gen;         /* session the countdown was drawn for; 0 = idle */
    uint64_t rng;         /* wyrand state */
    double interval;      /* R of session `gen` */
    unsigned max_depth;   /* of session `gen` */
    unsigned ordinal;     /* of this thread in session `gen` */
    size_t ring_capacity; /* of session `gen` */
    uint64_t saved_countdown;
    uintptr_t outside_pc;     /* a first frame found not the profiler's ... */
    uint64_t outside_version; /* ... at this self-frame table version */
    unsigned guard;
    bool init;    /* first allocation seen */
    bool key_set; /* thread-exit destructor armed */
    bool exited;  /* thread-exit destructor ran: no ring any more */
} tstate;

static __thread tstate ts __attribute__((tls_model("initial-exec")));

static pthread_key_t g_exit_key;

/* ------------------------------------------------------------------ guard */

/* The guard's contract, also towards signal handlers.
 * While a thread holds it, its allocations are never sampled and its frees
 * never touch the live table, so a signal handler that allocates
 * (undefined behaviour, but glibc survives it) while the thread is inside
 * the profiler never re-enters a profiler lock or structure; a sampled
 * block such a handler frees stays in the live table until its address is
 * freed or sampled again. A handler that runs outside the guard is an
 * ordinary caller. The stores are ordered for a handler arriving between
 * any two of them (signal fences): the guard counts as held before the
 * countdown is parked at INT64_MAX and until it is restored, and the
 * countdown to restore is read before, so no handler can overwrite it. A
 * hit in those two windows (the countdown is live, the guard held) takes
 * the saved countdown back (mp_prof_hook_sample): the thread never stops
 * sampling for good. */
/* The guard at depth 0, taken and dropped: for the hook entries, which
 * have found it free (ts.guard == 0) on entry and so hold it at depth 1
 * until they drop it (every nested enter, theirs or a signal handler's,
 * has had its exit by then). */
static HOOK inline void guard_take(void)
{
    uint64_t cd = mp_prof_hook_countdown;
    ts.guard = 1;
    atomic_signal_fence(memory_order_seq_cst);
    ts.saved_countdown = cd;
    atomic_signal_fence(memory_order_seq_cst);
    mp_prof_hook_countdown = INT64_MAX; /* internal allocations never reach zero */
    atomic_signal_fence(memory_order_seq_cst);
}

static HOOK inline void guard_drop(void)
{
    mp_prof_hook_countdown = ts.saved_countdown;
    atomic_signal_fence(memory_order_seq_cst);
    ts.guard = 0;
    atomic_signal_fence(memory_order_seq_cst);
}

HOOK void mp_guard_enter(void)
{
    if (ts.guard == 0)
        guard_take();
    else
        ts.guard++;
}

HOOK void mp_guard_exit(void)
{
    if (ts.guard == 1)
        guard_drop();
    else
        ts.guard--;
}

/* Parks this thread's countdown for good: it never reaches zero again
 * (2^63 bytes away), so no allocation of the thread is sampled or
 * consumes an interval, in this session or a later one (a new session
 * re-arms a thread only when its countdown expires). Frees are not
 * guarded and take the free path as before. Inside a guard, the
 * countdown the guard will restore is the one parked. */
void mp_prof_thread_exclude(void)
{
    if (ts.guard != 0)
        ts.saved_countdown = INT64_MAX;
    else
        mp_prof_hook_countdown = INT64_MAX;
}

/* -------------------------------------------------------------------- RNG */

static HOOK uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A thread's RNG state: its session's seed mixed with its ordinal, so
 * that threads draw independent streams. */
static uint64_t rng_seed(uint64_t seed, uint64_t stream)
{
    uint64_t a = seed, b = stream * 0xD1B54A32D192ED03ULL + 1;
    return splitmix64(&a) ^ splitmix64(&b);
}

/* The draws' generator: wyrand (a Weyl sequence folded by one 64x64->128
 * multiply; passes BigCrush and PractRand like splitmix64, which takes two
 * multiplies and three shift-xors a draw). The seed is still mixed by
 * splitmix64, off the hot path. */
__extension__ typedef unsigned __int128 mp_u128; /* GCC and Clang on 64-bit targets */

static HOOK uint64_t wyrand(uint64_t *state)
{
    uint64_t s = (*state += 0xA0761D6478BD642FULL);
    mp_u128 m = (mp_u128)s * (s ^ 0xE7037ED1A0B428DBULL);
    return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

/* One exponential draw with mean `mean` from *state (wyrand). */
static HOOK uint64_t rng_draw(uint64_t *state, double mean)
{
    uint64_t z = wyrand(state);
    double x = mp_neg_log_unit((z >> 11) + 1) * mean; /* -log(u), u in (0, 1]: Exp(mean) */
    if (!(x < (double)MP_MAX_COUNTDOWN))
        return MP_MAX_COUNTDOWN;
    return (uint64_t)(int64_t)x; /* floor; x < 2^62 fits int64: no unsigned conversion's test */
}

static uint64_t random_seed(void)
{
    uint64_t s = 0;
    if (!MP_ENTROPY(&s, sizeof s)) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        s = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts ^
            ((uint64_t)getpid() << 48);
    }
    return s;
}

/* -------------------------------------------------------------- estimator */

double mp_estimator_weight(uint64_t size, double interval)
{
    return mp_weight((double)size / interval); /* 1/p, p = 1 - exp(-S/R) */
}

/* ---------------------------------------------------------------- capture */

static HOOK int capture(uintptr_t *buf, int cap)
{
#if MP_HAVE_LIBUNWIND
    return unw_backtrace((void **)buf, cap);
#else
    return backtrace((void **)buf, cap);
#endif
}

void mp_sampler_warm_up(void)
{
    uintptr_t buf[64];
    mp_guard_enter();
    mp_unwind_nofd_install(); /* before libunwind's first unwind opens its pipe */
    mp_unwind_fast_flush();   /* rules of code unloaded since the last session */
    (void)capture(buf, 64);
    mp_guard_exit();
}

/* The self-frame filter, once per call site. Outside static mode a stack
 * whose first frame is not the profiler's has nothing to cut, and whether
 * it is depends on that frame and the table alone: a thread keeps the
 * last first frame found outside and the table version it was found at
 * (read before the table), and takes 0 for the same frame while the
 * version stays (a loop's allocation site: every sample but the first). */
static HOOK size_t skip_profiler(const uintptr_t *pcs, size_t n)
{
    uint64_t v = mp_self_frames_version();
    if (n > 0 && pcs[0] == ts.outside_pc && v == ts.outside_version)
        return 0;
    size_t skip = mp_frames_skip_profiler(pcs, n);
    if (skip == 0 && n > 0 && !mp_self_frames_static_mode()) {
        ts.outside_pc = pcs[0];
        ts.outside_version = v;
    }
    return skip;
}

/* -------------------------------------------------------- fork vs. capture */

/* A capture runs libunwind and, through it, glibc's dl_iterate_phdr.
 * Their locks are not the profiler's: libunwind's caches (taken with
 * every signal blocked) and the loader's dl_load_write_lock, which
 * glibc's fork() does not reset in the child. A fork() while another
 * thread is inside them gives a child that holds them forever: its first
 * capture that needs them waits, deaf to every signal (alarm() cannot end
 * it), and so does whoever waits for the child (issue 39: a test whose
 * parent waited in waitpid until the harness's timeout).
 *
 * So no capture is in progress at fork(): the prepare handler announces
 * the fork (g_forks, a count: several threads may fork at once), then
 * waits until g_captures, the captures in progress, is zero, before it
 * takes any profiler lock. A capture counts itself in before it reads
 * the announcement (both sequentially consistent: either the forking
 * thread sees the capture, or the capture sees the fork), and one that
 * starts while a fork is announced skips its walk: the sample is
 * recorded with an empty stack (its bytes counted, its site unknown).
 * It must not wait for the fork instead: a thread that allocates inside
 * its own dl_iterate_phdr callback holds the loader lock that a capture
 * in progress may be waiting for, and the forking thread waits for that
 * capture. Nothing a capture waits for is held by the forking thread. */
static _Atomic unsigned g_captures, g_forks;

void (*mp_sampler_capture_probe)(void);

static HOOK bool capture_begin(void)
{
    atomic_fetch_add(&g_captures, 1);
    if (__builtin_expect(atomic_load(&g_forks) == 0, 1))
        return true;
    atomic_fetch_sub(&g_captures, 1);
    return false;
}

static HOOK void capture_end(void) { atomic_fetch_sub(&g_captures, 1); }

/* The wait is bounded (about a second): a capture may wait for the
 * loader lock held by a thread inside its own dl_iterate_phdr callback,
 * and that thread for a lock of the program's that the forking thread
 * holds. Past the bound the fork goes on, as it did before this wait
 * existed: never a deadlock of the parent, at worst the rare child that
 * inherits a held lock. */
enum { FORK_WAIT_YIELDS = 64, FORK_WAIT_NAPS = 10000, FORK_WAIT_NAP_NS = 100 * 1000 };

void mp_sampler_fork_prepare(void)
{
    atomic_fetch_add(&g_forks, 1);
    for (unsigned spins = 0; atomic_load(&g_captures) != 0; spins++) {
        if (spins < FORK_WAIT_YIELDS) {
            sched_yield();
        } else if (spins < FORK_WAIT_YIELDS + FORK_WAIT_NAPS) {
            /* a capture waiting on the loader lock: let it have the CPU */
            struct timespec ts = {0, FORK_WAIT_NAP_NS};
            nanosleep(&ts, NULL);
        } else {
            break;
        }
    }
}

void mp_sampler_fork_parent(void) { atomic_fetch_sub(&g_forks, 1); }

/* The forking thread is the only one: no capture, no other fork. */
void mp_sampler_fork_child(void)
{
    atomic_store(&g_captures, 0);
    atomic_store(&g_forks, 0);
}

/* ----------------------------------------------------------- thread state */

static void thread_exit(void *arg);

void mp_sampler_global_init(void) { pthread_key_create(&g_exit_key, thread_exit); }

/* Re-initializes this thread for the current session; returns the new
 * countdown. The caller stores it (outside any guard). */
static HOOK uint64_t thread_reset(void)
{
    mp_thread_rec *stale = NULL;
    uint64_t cd;
    mp_guard_enter();
    if (!ts.init) {
        ts.init = true;
        if (!atomic_load_explicit(&g_rec.observed, memory_order_relaxed))
            atomic_store_explicit(&g_rec.observed, 1, memory_order_relaxed);
    }
    bool locked = atomic_load_explicit(&g_rec.active_gen, memory_order_acquire) != 0;
    if (locked)
        mp_rw_rdlock(&g_rec.rw);
    uint64_t gen = atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed);
    if (ts.rec != NULL && ts.rec->gen != gen) {
        stale = ts.rec; /* its session ended: it was unregistered then */
        ts.rec = NULL;
    }
    if (gen == 0) {
        ts.gen = 0;
        cd = MP_IDLE_COUNTDOWN;
    } else {
        ts.gen = gen;
        ts.interval = g_rec.cfg.interval;
        ts.max_depth = g_rec.cfg.max_depth;
        ts.ring_capacity = g_rec.cfg.ring_capacity;
        ts.ordinal = atomic_fetch_add_explicit(&g_rec.next_ordinal, 1, memory_order_relaxed);
        ts.rng = rng_seed(g_rec.cfg.seed ? g_rec.cfg.seed : random_seed(), ts.ordinal);
        cd = rng_draw(&ts.rng, ts.interval);
    }
    if (locked)
        mp_rw_rdunlock(&g_rec.rw);
    mp_rec_thread_release(stale);
    mp_guard_exit();
    return cd;
}

void mp_sampler_reset_current_thread(void) { mp_prof_hook_countdown = thread_reset(); }

bool mp_sampler_observed(void)
{
    return atomic_load_explicit(&g_rec.observed, memory_order_relaxed) != 0;
}

/* Thread exit (pthread key destructor): hands the ring's records to the
 * overflow shards and releases the record. Hits after this point find no
 * ring and are counted as dropped_teardown. */
static void thread_exit(void *arg)
{
    (void)arg;
    mp_guard_enter();
    ts.exited = true;
    mp_thread_rec *t = ts.rec;
    ts.rec = NULL;
    if (t != NULL) {
        mp_rw_rdlock(&g_rec.rw);
        if (t->gen == atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed)) {
            uint64_t lost = mp_rec_thread_exit(t);
            if (lost != 0)
                MP_COUNT(dropped_overflow_full, lost);
        }
        mp_rw_rdunlock(&g_rec.rw);
        mp_rec_thread_free(t);
    }
    mp_guard_exit();
}

/* --------------------------------------------------------------- recording */

/* The stack of the capture t->pcs[0..n) with its first `skip` frames cut
 * (rw shared held): the thread's last one when equal frame for frame,
 * else the depot's, which becomes the last one. */
static HOOK const mp_stack *stack_of(mp_thread_rec *t, int n, size_t skip, int cap)
{
    size_t avail = (size_t)n - skip;
    uint32_t depth = avail > ts.max_depth ? ts.max_depth : (uint32_t)avail;
    bool truncated = avail > ts.max_depth || n == cap;
    const mp_stack *last = t->last_stack;
    if (last != NULL && last->depth == depth && last->truncated == (uint32_t)truncated &&
        memcmp(last->pcs, t->pcs + skip, depth * sizeof *t->pcs) == 0)
        return last;
    return t->last_stack = mp_depot_intern(t->pcs + skip, depth, truncated);
}

/* Records the sampled block p of `size` bytes for session ts.gen. Runs
 * under the guard; the capture happens before any lock is taken. Inlined
 * into mp_prof_hook_sample, which the template's slow path tail-calls:
 * the capture then starts one frame above the application's, and every
 * profiler frame fewer is one frame less for the unwinder to step and
 * for the self-frame filter to classify (BENCHMARKS.md, "One sample"). */
static HOOK __attribute__((always_inline)) inline void record(void *p, size_t size,
                                                              const mp_unwind_start *from)
{
    guard_take(); /* mp_prof_hook_sample found it free */
    uint64_t gen = ts.gen;
    if (ts.exited) {
        mp_rw_rdlock(&g_rec.rw);
        if (atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) == gen) {
            MP_COUNT(taken, 1);
            MP_COUNT(dropped_teardown, 1);
        }
        mp_rw_rdunlock(&g_rec.rw);
        guard_drop();
        return;
    }
    if (ts.rec == NULL) {
        mp_rw_rdlock(&g_rec.rw);
        if (atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) == gen)
            ts.rec = mp_rec_thread_new(gen, ts.ordinal, ts.ring_capacity,
                                       ts.max_depth + MP_CAPTURE_SLACK);
        mp_rw_rdunlock(&g_rec.rw);
        if (ts.rec != NULL && !ts.key_set) {
            ts.key_set = pthread_setspecific(g_exit_key, &ts) == 0;
        }
        if (ts.rec == NULL) {
            mp_rw_rdlock(&g_rec.rw);
            if (atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) == gen) {
                MP_COUNT(taken, 1);
                MP_COUNT(dropped_registration, 1); /* no memory for a ring */
            }
            mp_rw_rdunlock(&g_rec.rw);
            guard_drop();
            return;
        }
    }

    mp_thread_rec *t = ts.rec;
    int cap = (int)(ts.max_depth + MP_CAPTURE_SLACK);
    bool changed = true;
    int n = 0; /* a fork is announced: no walk, an empty stack (see "fork vs. capture") */
    if (capture_begin()) {
        if (__builtin_expect(mp_sampler_capture_probe != NULL, 0))
            mp_sampler_capture_probe();
        n = mp_unwind_fast(from, t->pcs, cap, &changed);
        if (n < 0) {
            n = capture(t->pcs, cap); /* a frame the fast walk does not handle */
            changed = true;
        }
        capture_end();
    }
    if (n < 0)
        n = 0;
    int last_n = t->last_n; /* the buffer's frames before this capture */
    t->last_n = 0;          /* until last_stack is this capture's stack */
    size_t skip = skip_profiler(t->pcs, (size_t)n);
    /* The estimator's weight (mp_estimator_weight) with the size converted
     * as signed: p != NULL, and no allocator returns a block of 2^63 bytes
     * or more (their limit is PTRDIFF_MAX), so there is no unsigned
     * conversion's test. */
    mp_record r = {.size = size, .weight = mp_weight((double)(int64_t)size / ts.interval)};

    mp_rw_rdlock(&g_rec.rw);
    if (atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed) != gen)
        goto out; /* the session ended while we captured */
    MP_COUNT(taken, 1);
    /* A thread's samples often repeat its previous stack (a loop's
     * allocation site). The walk says whether it found each frame already
     * in the buffer: then, with as many frames and as many cut, this is
     * the stack the buffer held (depth and truncation follow from n and
     * skip). Otherwise, compared frame for frame, it may still be. */
    if (t->last_stack != NULL && !changed && n == last_n && skip == t->last_skip)
        r.stack = t->last_stack;
    else
        r.stack = stack_of(t, n, skip, cap);
    if (r.stack == NULL) {
        MP_COUNT(dropped_registration, 1); /* no memory for the stack */
        goto out;
    }
    t->last_n = n;
    t->last_skip = (uint32_t)skip;
    /* The one clock read of a sample (its age in reports); never on the
     * unsampled path. */
    if (!mp_live_insert((uintptr_t)p, r.stack, size, r.weight, gen, mp_now_nanos()))
        MP_COUNT(dropped_live_table_full, 1);
    if (!t->registered && !mp_rec_register(t)) {
        MP_COUNT(dropped_registration, 1);
        goto out;
    }
    if (!mp_rec_push(t, &r))
        MP_COUNT(dropped_overflow_full, 1);
out:
    mp_rw_rdunlock(&g_rec.rw);
    guard_drop();
}

/* ------------------------------------------------------- template entries */

HOOK void *mp_prof_hook_sample(void *p, size_t size)
{
    if (ts.guard != 0) {
        /* Only a signal handler that interrupted mp_guard_enter/exit gets
         * here (the countdown is parked otherwise): give the countdown
         * being saved or restored back, never park it for good. */
        mp_prof_hook_countdown = ts.saved_countdown;
        return p;
    }
    uint64_t gen = atomic_load_explicit(&g_rec.active_gen, memory_order_relaxed);
    if (__builtin_expect(!ts.init || ts.gen != gen, 0)) {
        mp_prof_hook_countdown = thread_reset();
        if (!mp_prof_hook_consume(size))
            return p; /* the new interval does not end inside this block */
    }
    if (ts.gen == 0) {
        mp_prof_hook_countdown = MP_IDLE_COUNTDOWN;
        return p;
    }
    mp_prof_hook_countdown = rng_draw(&ts.rng, ts.interval);
    if (p != NULL) {
        mp_unwind_start from = MP_UNWIND_HERE(); /* the template's caller */
        record(p, size, &from);
    }
    return p;
}

/* The free-side entries hold the recorder lock shared (one atomic
 * read-modify-write each way) so that fork() never copies a live-table
 * stripe lock held by another thread. */
HOOK void mp_prof_hook_forget(void *p)
{
    if (ts.guard != 0)
        return; /* profiler-internal memory: never sampled */
    guard_take();
    mp_rw_rdlock(&g_rec.rw);
    mp_live_remove((uintptr_t)p, 0);
    mp_rw_rdunlock(&g_rec.rw);
    guard_drop();
}

HOOK uint64_t mp_prof_hook_live_id(const void *p)
{
    if (ts.guard != 0)
        return 0;
    guard_take();
    mp_rw_rdlock(&g_rec.rw);
    uint64_t id = mp_live_id((uintptr_t)p);
    mp_rw_rdunlock(&g_rec.rw);
    guard_drop();
    return id;
}

HOOK void mp_prof_hook_forget_id(const void *p, uint64_t id)
{
    if (ts.guard != 0)
        return;
    guard_take();
    mp_rw_rdlock(&g_rec.rw);
    mp_live_remove((uintptr_t)p, id);
    mp_rw_rdunlock(&g_rec.rw);
    guard_drop();
}

void mp_prof_hook_register(uintptr_t start, uintptr_t end)
{
    if (start < end)
        mp_self_frames_register(start, end);
}

/* The library's own hook-section range (the functions above). */
__attribute__((constructor)) static void register_own_hooks(void)
{
    mp_prof_hook_register((uintptr_t)__start_mimprof_hooks, (uintptr_t)__stop_mimprof_hooks);
}

/* -------------------------------------------------------------------- fork */

mp_thread_rec *mp_sampler_current_rec(void) { return ts.rec; }

/* --------------------------------------------------------------------- time */

uint64_t mp_now_nanos(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t mp_wall_nanos(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
