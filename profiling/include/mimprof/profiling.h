/* SPDX-License-Identifier: MIT */
/**
 * @file profiling.h
 * @brief mimprof-profiling: a sampling heap profiler wrapped around any
 *        allocator provider, producing pprof.
 *
 * Overview
 * --------
 * A *sampling allocator* is instantiated at compile time over a provider
 * (see <mimprof/sys.h> for the provider contract and
 * <mimprof/sampling.h> for MP_PROF_SAMPLING_ALLOCATOR). Every allocation
 * decrements a thread-local byte countdown; when it crosses zero the
 * allocation is *sampled*: its stack is captured and it is recorded with
 * the weight of the unbiased estimator (for requested size S and mean
 * interval R, p = 1 - exp(-S/R); the sample stands for 1/p objects and S/p
 * bytes). Sampled pointers are tracked in a live table until freed.
 *
 * A *Profiler session* (mp_profiler_start) owns the single process
 * recorder. mp_profiler_report() returns one uncompressed pprof holding
 * the allocations since the previous report (interval samples, label
 * `__delta__="false"`, values alloc_objects/alloc_space) and the live
 * snapshot (inuse_objects/inuse_space), one sample per stack and age
 * bucket with the numeric label `age` (the bucket's lower bound, unit
 * "seconds"; bounds 0, 1s, 3s, 10s, 30s, 1m, 3m, 10m, 30m, 1h, 3h, 6h,
 * 12h, 1d, 3d, 7d). Its comments reconcile the estimated heap with the
 * process's RSS (see mp_profiler_set_allocator_stats() and
 * profiling/README.md, "Reconciling with RSS").
 *
 * Errors are a typed enum, independent of any uploader; see
 * mp_prof_strerror().
 *
 * Sampling rules
 * --------------
 * - Intervals are exponential with mean `sample_interval_bytes`; after a
 *   sampled allocation one fresh interval is drawn (one RNG draw per hit).
 *   Unsampled allocations cost one subtraction and one branch.
 * - A thread's first allocation (of at least one byte) initializes its
 *   sampling state; that is what "the sampling allocator has been
 *   observed" means for mp_profiler_start(). While no session runs, a
 *   thread re-checks for one every 64 KiB it allocates (no RNG, no
 *   capture); the thread that starts a session samples at the new rate
 *   from its next byte, other threads from their next such check.
 * - With a fixed `seed`, each thread's RNG stream is a function of the
 *   seed and of the order in which threads first sample in the session,
 *   so a single-threaded program samples identically run after run.
 * - realloc is a free of the old block and an allocation of the new one
 *   by the same rule; on failure nothing changes (the old block keeps its
 *   live entry). A block sampled in one session and freed in a later one
 *   changes nothing in the later one.
 *
 * Platforms
 * ---------
 * The loader- and object-format-dependent parts are one build-time backend
 * (the Meson option `platform`). ELF (Linux, FreeBSD): everything below.
 * macOS: sessions, reports and stacks (execinfo backtrace()); mappings from
 * dyld's image list (executable segments, LC_UUID as build-id); function
 * names from dladdr(), kept only when LC_FUNCTION_STARTS shows the symbol
 * is the containing function. Generic (other systems, and
 * `-Dplatform=generic` on Linux): no mappings; function names from
 * dladdr() only where it matches the containing symbol (glibc). Off ELF,
 * MP_PROF_SYMBOLIZE_LINES and mp_profiler_write_image() answer
 * MP_PROF_E_UNSUPPORTED and there are no LD_PRELOAD objects; nothing is
 * approximated.
 *
 * Threads
 * -------
 * Every function here may be called from any thread. Sampling hits are
 * buffered per thread (a registered FIFO ring) and reports drain every
 * ring and the global overflow shards; a thread that exits hands its
 * buffered records to the overflow shards. Allocations that happen in a
 * thread after its exit handler ran (for example in a later thread-local
 * destructor) are counted as mp_prof_stats::dropped_teardown.
 *
 * Profiler-internal memory
 * ------------------------
 * While the profiler itself runs (a sampling hit, a report, start, stop),
 * the calling thread holds a recursion guard: its allocations, even
 * through a sampling allocator (as with the LD_PRELOAD objects, where the
 * profiler's malloc is the hooked malloc), are never sampled and do not
 * consume the application's sampling interval.
 *
 * fork()
 * ------
 * The profiler's locks are taken around fork() (pthread_atfork), so the
 * child never inherits one locked. In the child the parent's session is
 * ended: its pending allocation records are released, the inherited
 * handle answers MP_PROF_E_INACTIVE to mp_profiler_report() (stop and free
 * on it are safe and affect nothing else), the process recorder is free
 * for a new mp_profiler_start(), and the sampling allocator keeps working.
 * The sampled blocks the child inherited are live in it too: they stay in
 * the live table (the child's frees remove them as usual), and the next
 * session started in the child reports them as in-use, with the stacks
 * and allocation times the parent sampled them with, while its
 * allocation values count only the child's own allocations. A child that
 * will not profile releases them with mp_profiler_drop_inherited().
 * The parent's session is untouched.
 *
 * LD_PRELOAD objects
 * ------------------
 * `libmimprof-preload-mimalloc.so` and `libmimprof-preload-jemalloc.so`
 * (built with the `preload` feature) define the malloc family over the
 * sampling allocator over that provider, start a session when loaded and
 * write the final report when the process exits:
 *
 *     LD_PRELOAD=libmimprof-preload-mimalloc.so MIMPROF_OUTPUT=/tmp/prof/ ./program
 *
 * The variables, their defaults and what each process does on fork and
 * exec: the `mimprof` command's README (section "Environment"). Besides
 * those, every report reads `MIMPROF_DEBUG_ROOT`, with or without the
 * preload: where separate debug files are looked up by build-id
 * (`ROOT/.build-id/xx/yyyy.debug`) and debug link; an absolute path;
 * default `/usr/lib/debug`.
 *
 * A malformed value is reported on stderr and disables profiling; the
 * program runs unchanged. Reports are uncompressed pprof. A forked child
 * starts its own session (and writes its own file) when the output
 * pattern contains `%p` or names a directory; otherwise it is not
 * profiled. Programs it executes start their own sessions from the same
 * environment (under `mimprof run`: only with `--follow-exec`).
 */
#ifndef MIMPROF_PROFILING_H
#define MIMPROF_PROFILING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks what libmimprof-profiling exports: the library is built with
 *  hidden visibility, so everything else in it is internal. */
#if defined(__GNUC__)
#define MP_PROF_API __attribute__((visibility("default")))
#else
#define MP_PROF_API
#endif

/** Status of a profiling call. */
typedef enum mp_prof_status {
    MP_PROF_OK = 0,               /**< success */
    MP_PROF_E_INVALID_CONFIG = 1, /**< a config field is out of range */
    MP_PROF_E_ALLOCATOR_NOT_OBSERVED =
        2,                  /**< no sampling allocator has served an allocation in this process */
    MP_PROF_E_BUSY = 3,     /**< another live session owns the process recorder */
    MP_PROF_E_INACTIVE = 4, /**< the session was stopped */
    MP_PROF_E_NOMEM = 5,    /**< out of memory */
    MP_PROF_E_INTERNAL = 6, /**< an internal invariant failed (a bug) */
    MP_PROF_E_IO = 7,       /**< a file could not be read or written */
    MP_PROF_E_UNSUPPORTED = 8, /**< not available on this platform or build: symbolize=LINES
                                    without libdw (always on macOS and with the generic
                                    backend), heap images off the ELF backend, demangling
                                    without the demangle feature */
    MP_PROF_E_BAD_IMAGE = 9,   /**< a heap image could not be read or was refused
                                    (<mimprof/profiling_image.h>) */
    MP_PROF_E_NOT_MANGLED = 10 /**< mp_prof_demangle(): not a linkage name the demangler
                                    reads (a C name), or refused by it */
} mp_prof_status;

/** How report() names stack frames. */
typedef enum mp_prof_symbolize {
    /** Addresses and mappings only (server-side symbolization). */
    MP_PROF_SYMBOLIZE_NONE = 0,
    /** Function names from ELF .symtab, else the .symtab of the separate debug
     *  file the build-id names, else .dynsym. */
    MP_PROF_SYMBOLIZE_FUNCTIONS = 1,
    /** Plus file:line and inlined frames (DWARF, libdw feature; mp_profiler_start()
     *  answers MP_PROF_E_UNSUPPORTED in a build without it). Opt-in: the first
     *  report reads the DWARF line tables, ~215M instructions where libc's
     *  debug info is installed (libdw inflates it), against ~8M for FUNCTIONS. */
    MP_PROF_SYMBOLIZE_LINES = 2
} mp_prof_symbolize;

/** Session configuration; start from mp_prof_config_init(). */
typedef struct mp_prof_config {
    size_t sample_interval_bytes; /**< mean bytes between samples; default 512 KiB; >= 1 */
    unsigned max_stack_depth;     /**< frames per stack; default 64; 1..MP_PROF_MAX_STACK_DEPTH */
    size_t ring_capacity;         /**< records per thread ring; default 256; >= 1 */
    size_t
        max_live_samples; /**< bound on the live table; default 1<<20; grows on demand up to it */
    uint64_t seed;        /**< 0 = random; a fixed seed makes sampling deterministic per thread */
    mp_prof_symbolize symbolize; /**< default MP_PROF_SYMBOLIZE_FUNCTIONS (LINES costs more) */
    size_t overflow_stacks; /**< distinct stacks the global overflow shards can hold (they aggregate
                                 full-ring handoffs and thread-exit data per stack, so their memory
                                 does not grow with the sampling rate); default 65536;
                                 1..MP_PROF_MAX_OVERFLOW */
    size_t report_max_records; /**< budget of records one report drains (shared fairly between
                                  thread rings and overflow shards; the rest waits for the next
                                  report); default 1<<24; >= 1 */
} mp_prof_config;

/** Largest accepted mp_prof_config::sample_interval_bytes (1 TiB). */
#define MP_PROF_MAX_INTERVAL ((size_t)1 << 40)
/** Largest accepted mp_prof_config::max_stack_depth (frames kept per stack). */
#define MP_PROF_MAX_STACK_DEPTH 512u
/** Largest accepted mp_prof_config::ring_capacity. */
#define MP_PROF_MAX_RING ((size_t)1 << 20)
/** Largest accepted mp_prof_config::overflow_stacks. */
#define MP_PROF_MAX_OVERFLOW ((size_t)1 << 26)

/**
 * Counters of the process recorder (cumulative since process start, except
 * the "now" gauges).
 *
 * Every sampling hit in a running session counts in samples_taken and then
 * ends in exactly one of: a thread ring (ring_records), an overflow shard
 * (overflow_records), a report (samples_reported), a counted drop
 * (dropped_registration, dropped_teardown, dropped_overflow_full), or the
 * records a stop (or fork) discarded unreported (records_discarded). So,
 * once rings and shards are drained:
 * samples_taken == samples_reported + dropped_registration +
 * dropped_teardown + dropped_overflow_full + records_discarded.
 * dropped_live_table_full counts live-table entries, not records.
 */
typedef struct mp_prof_stats {
    uint64_t samples_taken;    /**< sampling hits in a session (see above) */
    uint64_t samples_reported; /**< records consumed by reports */
    uint64_t
        dropped_registration;  /**< hits dropped: thread ring not registered (registry contended) */
    uint64_t dropped_teardown; /**< hits dropped: thread-local storage gone (thread exit) */
    uint64_t dropped_overflow_full; /**< hits dropped: ring full and the overflow shards could take
                                       no new stack (overflow_stacks reached) */
    uint64_t dropped_live_table_full; /**< live entries dropped: table at max_live_samples */
    uint64_t ring_records;            /**< records waiting in thread rings now */
    uint64_t overflow_records;        /**< records waiting (aggregated) in overflow shards now */
    uint64_t live_samples;            /**< sampled pointers currently live */
    uint64_t registered_threads;      /**< thread rings registered now */
    uint64_t last_report_nanos;       /**< duration of the last report */
    uint64_t symbol_bytes;            /**< memory held by symbol data */
    int last_symbol_quality; /**< mp_prof_symbol_quality of the last report, -1 before one */
    uint64_t
        records_discarded; /**< records released unreported by a stop, a fork or a failed report */
    uint64_t stacks;       /**< distinct stacks held by the running session now */
    bool active;           /**< a session is running now */
    bool allocator_observed; /**< a sampling allocator has served an allocation */
} mp_prof_stats;

/** An exclusive profiling session (opaque). */
typedef struct mp_profiler mp_profiler;

/** Fills `cfg` with the defaults. */
MP_PROF_API void mp_prof_config_init(mp_prof_config *cfg);

/**
 * Validates `cfg`, checks that a sampling allocator has served at least one
 * allocation in this process, claims the process recorder and starts a new
 * session generation.
 * @return MP_PROF_OK and `*out`; MP_PROF_E_INVALID_CONFIG,
 *         MP_PROF_E_UNSUPPORTED (symbolize is MP_PROF_SYMBOLIZE_LINES in a
 *         build without DWARF line support: never silently degraded),
 *         MP_PROF_E_ALLOCATOR_NOT_OBSERVED, MP_PROF_E_BUSY or
 *         MP_PROF_E_NOMEM otherwise (`*out` untouched).
 */
MP_PROF_API mp_prof_status mp_profiler_start(const mp_prof_config *cfg, mp_profiler **out);

/**
 * Drains every thread ring and overflow shard and returns one uncompressed
 * pprof: the interval samples since the previous report and the live
 * snapshot. `*pprof` is owned by the caller: release it with
 * mp_prof_buffer_free().
 * @return MP_PROF_E_INACTIVE when `p` was stopped.
 */
MP_PROF_API mp_prof_status mp_profiler_report(mp_profiler *p, uint8_t **pprof, size_t *len);

/** Most comments mp_profiler_annotate() keeps for one report. */
#define MP_PROF_MAX_NOTES 8u

/**
 * Adds `comment` (copied; at most 1024 bytes) to the comments of the next
 * mp_profiler_report() (`go tool pprof -comments` shows them), for
 * example why that report is written; a successful report consumes them.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL, or longer than 1024
 *         bytes, or MP_PROF_MAX_NOTES already waiting); MP_PROF_E_INACTIVE
 *         (`p` was stopped); MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_profiler_annotate(mp_profiler *p, const char *comment);

/**
 * How the next reports (and their peaks) name their frames, from now on:
 * the mode of mp_prof_config::symbolize, changed while the session runs.
 * A process that hands its reports unsymbolized to a host that names them
 * (mimprof run's collector) names them itself once the host is gone.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL, or not a mode);
 *         MP_PROF_E_UNSUPPORTED (MP_PROF_SYMBOLIZE_LINES in a build
 *         without libdw); MP_PROF_E_INACTIVE (`p` was stopped).
 */
MP_PROF_API mp_prof_status mp_profiler_set_symbolize(mp_profiler *p, mp_prof_symbolize mode);

/** The high-water mark of one report window (mp_profiler_report_peak()). */
typedef struct mp_prof_peak_info {
    uint64_t bytes;             /**< estimated live heap at the mark (the sum the peak
                                     profile's inuse_space values are made of) */
    uint64_t objects;           /**< objects the peak set stands for (inuse_objects) */
    int64_t time_nanos;         /**< wall clock (CLOCK_REALTIME) when the mark was reached */
    int64_t window_start_nanos; /**< the window: from the previous report (or the start) */
    int64_t window_end_nanos;   /**< ... to the report that closed it */
    uint64_t samples;           /**< sampled blocks in the peak set */
    bool incomplete; /**< memory ran out while keeping the peak set: blocks are missing */
} mp_prof_peak_info;

/**
 * The peak of the window that the last mp_profiler_report() closed: one
 * uncompressed pprof with the sample types inuse_objects/count and
 * inuse_space/bytes only, holding the sampled live set as it was when the
 * window's estimated live heap was highest, and its size and time in the
 * profile's comments ("peak: N bytes estimated live at <UTC time>").
 *
 * How: the recorder keeps the estimated live heap (the weighted sum the
 * in-use values are made of) as sampled blocks come and go, and records a
 * new high-water mark when it exceeds the window's previous one by more
 * than 1/64 of it (so the mark is within 1.6% below the estimate's true
 * maximum); a mark costs no copy (the live set at a mark is rebuilt when
 * the report closes the window, from the live table and the sampled
 * blocks freed since the mark). All of it is on the sampling path:
 * unsampled allocations and frees pay nothing. The estimate is the
 * in-use estimator's, with its variance.
 *
 * Each report (also one that fails) starts a new window whose first mark
 * is the live set at that report, so a window's peak is never below what was live at either
 * of its ends. Before the first report the profile has no samples and
 * `info` is zero. Calling it again returns the same peak (until the next
 * report). `*pprof` is owned by the caller: release it with
 * mp_prof_buffer_free(). `info` may be NULL.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL pprof or len),
 *         MP_PROF_E_INACTIVE (`p` was stopped), MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_profiler_report_peak(mp_profiler *p, uint8_t **pprof, size_t *len,
                                                   mp_prof_peak_info *info);

/** Frees a buffer returned by mp_profiler_report(). NULL is a no-op. */
MP_PROF_API void mp_prof_buffer_free(uint8_t *pprof);

/** A figure of mp_prof_allocator_stats the allocator does not give. */
#define MP_PROF_STAT_NONE UINT64_MAX

/**
 * The allocator's own view of its memory, in bytes (what a provider's
 * statistics hook gives: `P_stats()` of <mimprof/sys.h>, whose
 * mp_sys_stats has the same fields). A figure not given is
 * MP_PROF_STAT_NONE.
 */
typedef struct mp_prof_allocator_stats {
    uint64_t allocated; /**< bytes in blocks the program holds (jemalloc stats.allocated) */
    uint64_t active;    /**< bytes in pages holding such blocks (jemalloc stats.active) */
    uint64_t resident;  /**< the allocator's resident bytes (jemalloc stats.resident); the only
                             figure that splits a report's rest into the allocator's slack and
                             what lies outside it (committed memory is not resident) */
    uint64_t mapped;    /**< bytes the allocator has mapped (jemalloc stats.mapped) */
    uint64_t committed; /**< bytes the allocator has committed (mimalloc) */
    uint64_t reserved;  /**< address space reserved */
} mp_prof_allocator_stats;

/**
 * Fills `out` (every field preset to MP_PROF_STAT_NONE) with the
 * allocator's figures; false when it has none. Called by
 * mp_profiler_report() on the reporting thread, under the recursion guard
 * (its allocations are not sampled), with the session lock held: it must
 * not call into the profiler.
 */
typedef bool (*mp_prof_allocator_stats_fn)(void *ctx, mp_prof_allocator_stats *out);

/**
 * The optional statistics hook of the session: each report's memory
 * reconciliation (its comments, see profiling/README.md, "Reconciling with
 * RSS") then states the allocator's own figures under the name
 * `allocator` (copied; e.g. "mimalloc"). `fn` NULL removes the hook.
 * Without one, a report still states RSS, the estimated live heap, the
 * profiler's own memory and the rest.
 * @return MP_PROF_E_INACTIVE when `p` was stopped; MP_PROF_E_INVALID_CONFIG
 *         when `p` is NULL, or `fn` is set and `allocator` is NULL or
 *         longer than 31 bytes.
 */
MP_PROF_API mp_prof_status mp_profiler_set_allocator_stats(mp_profiler *p, const char *allocator,
                                                           mp_prof_allocator_stats_fn fn,
                                                           void *ctx);

/**
 * From now until it exits, the calling thread's allocations are never
 * sampled and consume no sampling interval, in this session or any later
 * one, as if they were the profiler's own (see "Profiler-internal
 * memory"). For the threads of a profiler's own machinery: a runtime's
 * reporter, an uploader and the libraries it calls (the preload runtime
 * and the Pyroscope agent call it on their threads, so that uploading a
 * report never appears in the next one). The thread's frees are still
 * tracked: a sampled block it frees leaves the live set. Cannot be
 * undone; costs nothing on the allocation path. Async-signal-safe.
 */
MP_PROF_API void mp_prof_thread_exclude(void);

/**
 * Moves a descriptor that the profiler, or a host of it (a runtime, an
 * uploader), keeps open out of the program's way: duplicated close-on-exec
 * and the original closed, so that the numbers the program gets from
 * `open()` and the descriptors the programs it executes inherit are what
 * they would be without the profiler. Where to: at or above the soft
 * `RLIMIT_NOFILE` (numbers the program cannot get at its limit) when the
 * hard limit leaves room there (the soft limit is raised for the one
 * duplication and put back: prlimit(2), so a limit the program sets
 * meanwhile stands), from 4032 up when the limits allow it (the kernel
 * sizes the descriptor table by the highest number); with a soft limit
 * above 4096, 4032-4095 (below it, so a program holding more than 4032
 * descriptors meets them); with no room above a soft limit equal to the
 * hard one, the top 64 of the program's own range (mp_prof_fd_room() is
 * then false). Open it `O_CLOEXEC` in the first place, so that an exec
 * between the two calls cannot inherit it.
 * @return the new descriptor; `fd` itself when there is no room or `fd`
 *         is negative.
 */
MP_PROF_API int mp_prof_fd_high(int fd);

/**
 * Whether mp_prof_fd_high() can put descriptors where the program cannot
 * get their numbers at its current `RLIMIT_NOFILE`: false when the soft
 * limit equals the hard one and is below 4096 (`ulimit -n 64` sets
 * both), where any descriptor kept open takes a number the program would
 * get. The preload runtime, when it would keep descriptors (without
 * `mimprof run`'s collector, or serving HTTP, or naming its own frames),
 * steps aside in such a process (one line says so).
 */
MP_PROF_API bool mp_prof_fd_room(void);

/**
 * open(2) with `O_CLOEXEC` added, the result moved with mp_prof_fd_high():
 * for a file the profiler or its host opens while the program runs (a
 * report). When the program holds every number below its soft limit
 * (open() fails with EMFILE) and the hard limit leaves room, the file is
 * opened above the soft limit instead, so a program at its limit neither
 * loses a number nor makes the report fail.
 * @return the descriptor, or -1 with errno set.
 */
MP_PROF_API int mp_prof_fd_open(const char *path, int flags, mode_t mode);

/**
 * A descriptor for the length of one use (a report handed to a
 * collector, a message): `make(ctx)` (which opens it, `O_CLOEXEC`, and
 * returns it or -1 with errno) is called; when it fails with `EMFILE`
 * (the program holds every number below its soft `RLIMIT_NOFILE`) and
 * the hard limit leaves room, it is called again with the soft limit
 * raised for that call and put back (as mp_prof_fd_high() does), so the
 * descriptor lands above the program's numbers instead of failing. Not
 * moved otherwise: close it before returning to the program.
 * @return make's result.
 */
MP_PROF_API int mp_prof_fd_make(int (*make)(void *ctx), void *ctx);

/**
 * A descriptor that a host of the profiler keeps open in the program's
 * process, with the identity of the file it was opened on. The program
 * may close any descriptor (a daemon's `close_range(3, ~0U)`,
 * `closefrom()`) and then get the same number back from its own `open()`
 * or `accept()`: a number alone never says "ours". Use the descriptor
 * only while mp_prof_fd_check() says it still names its file; it must be
 * of a kind whose inode is its own (files, sockets, pipes; not eventfds,
 * which share one anonymous inode).
 */
typedef struct mp_prof_owned_fd {
    int fd;    /**< -1: none */
    dev_t dev; /**< device of the file it was opened on */
    ino_t ino; /**< inode of that file */
} mp_prof_owned_fd;

/** An mp_prof_owned_fd holding no descriptor. */
#define MP_PROF_OWNED_FD_NONE ((mp_prof_owned_fd){.fd = -1})

/**
 * Takes `fd` (just opened, and usually moved with mp_prof_fd_high()) into
 * `o` with the identity of what it names.
 * @return false (`fd` closed, `o->fd` -1) when `fd` is negative or cannot
 *         be identified.
 */
MP_PROF_API bool mp_prof_fd_take(mp_prof_owned_fd *o, int fd);

/**
 * Whether `o->fd` still names the file it was taken on. When it does not
 * (the program closed it, and may have its number back), `o->fd` becomes
 * -1 and the number is left alone: never read, written or closed.
 */
MP_PROF_API bool mp_prof_fd_check(mp_prof_owned_fd *o);

/** Closes `o->fd` if it is still ours (mp_prof_fd_check()); forgets it either way. */
MP_PROF_API void mp_prof_fd_close(mp_prof_owned_fd *o);

/**
 * A memory watch: says when this process's memory crosses a threshold,
 * and again at each further tenth of it, so that a program can take a
 * report (or a heap image) before the memory runs out rather than at the
 * next period. `mimprof run --report-above` is built on it.
 *
 * Memory: with `bytes`, the process's RSS (/proc/self/statm). With
 * `percent` (1..100), the cgroup v2 memory the kernel charges: of the
 * process's own cgroup and its ancestors, the one with the smallest
 * memory.high or memory.max; the threshold is that percentage of it and
 * the memory its memory.current.
 *
 * Steps: the first event when the memory reaches the threshold T, the
 * next ones at T + T/10, T + 2T/10, ... (one event per check however
 * many steps were passed); when the memory falls below T - T/10 the watch
 * re-arms at T, so each spike that crosses T gets its event.
 *
 * The watch keeps one descriptor (close-on-exec, near the top of the
 * descriptor range, checked to still be its file before each read). In a
 * forked child /proc/self named the parent: make a new watch there.
 */
typedef struct mp_prof_watch mp_prof_watch;

/** What mp_prof_watch_check() saw when it says the memory crossed. */
typedef struct mp_prof_watch_event {
    uint64_t memory;    /**< bytes now (RSS, or the cgroup's memory.current) */
    uint64_t crossed;   /**< the step reached: T, T + T/10, ... */
    uint64_t threshold; /**< T */
    uint64_t next;      /**< the next step */
    uint64_t limit;     /**< the cgroup limit a percentage is of; 0 for a size */
    unsigned percent;   /**< as given; 0 for a size */
    bool cgroup;        /**< memory is the cgroup's (else the RSS) */
} mp_prof_watch_event;

/**
 * Makes a watch of `bytes` of RSS, or (bytes = 0) of `percent` of the
 * cgroup limit. Reads /proc and the cgroup files; allocates.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (both or neither given,
 *         percent > 100, NULL out, a percentage of less than a byte),
 *         MP_PROF_E_UNSUPPORTED (a percentage and no cgroup v2 memory limit
 *         on the way up; not Linux), MP_PROF_E_IO (the file to watch could
 *         not be opened), MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_watch_new(uint64_t bytes, unsigned percent, mp_prof_watch **out);

/**
 * Reads the memory now (one pread(), about a microsecond; no allocation)
 * and says whether it reached the next step; then `ev` (may be NULL)
 * holds the figures. One thread at a time per watch; never from a
 * signal handler.
 */
MP_PROF_API bool mp_prof_watch_check(mp_prof_watch *w, mp_prof_watch_event *ev);

/** Closes the watch's descriptor (if still its own) and frees it. NULL: no-op. */
MP_PROF_API void mp_prof_watch_free(mp_prof_watch *w);

/**
 * Saves the session's state as a *heap image* at `path`: a mimprof-image
 * file (<mimprof/image.h>) that another process, later and on another
 * machine with the same binaries, turns into pprof, diffs or inspects
 * (`mimprof image pprof|top|diff|info`).
 *
 * The image holds the live samples (requested size, weight, session
 * generation and stack of every sampled block still live), the
 * allocations since the previous report summed per stack (what the next
 * report's `__delta__="false"` samples would hold so far), the stacks
 * (each frame a `code(build-id, path, offset)` foreign unit, so that it
 * names the same instruction wherever the module is loaded later), the
 * mappings with their build-ids, the configuration and the counters of
 * mp_prof_diagnostics(). `mimprof image pprof` of it gives the profile
 * mp_profiler_report() would have returned at that instant: the same
 * samples, values, locations and mappings, symbolized from the files the
 * mappings name, checked by build-id.
 *
 * Consistency: the state is read at one quiet point, while the recorder
 * lock is held exclusively (as session start and stop hold it): waiting
 * records are read there (not consumed: the next report still contains
 * them) and the live table is marked; it is then copied stripe by stripe
 * as it was at that point, while the process keeps allocating. A sampling
 * hit or a free of a sampled block waits at most for that quiet point
 * (about as long as a report's drain of the thread rings) or for one
 * stripe's copy; unsampled allocations never wait. The file is written
 * after the quiet point: under a temporary name in the same directory,
 * flushed (fdatasync) and renamed over `path`, so a reader never sees a
 * partial image and a failed write leaves nothing under `path`.
 *
 * Like mp_profiler_report(), it holds the session lock while it runs, so
 * a concurrent report, stop, image or fork() waits for it; it runs under
 * the recursion guard (its own allocations are never sampled).
 *
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (NULL or empty argument),
 *         MP_PROF_E_INACTIVE (stopped session), MP_PROF_E_IO (the file
 *         could not be written), MP_PROF_E_NOMEM, MP_PROF_E_UNSUPPORTED
 *         (a platform with 32-bit words, a build whose platform backend is
 *         not ELF (macOS, `-Dplatform=generic`), or more than the image
 *         format can carry), MP_PROF_E_INTERNAL (the image library refused the
 *         state: a bug).
 */
MP_PROF_API mp_prof_status mp_profiler_write_image(mp_profiler *p, const char *path);

/**
 * Ends the session: releases the process recorder and the pending
 * metadata. Idempotent; a stopped owner cannot affect a later session.
 */
MP_PROF_API mp_prof_status mp_profiler_stop(mp_profiler *p);

/** Stops the session (if running) and releases `p`. NULL is a no-op. */
MP_PROF_API void mp_profiler_free(mp_profiler *p);

/**
 * In a fork child that will not start a session: releases the sampled
 * live blocks inherited from the parent's session (see "fork()" above),
 * which a session started later would otherwise report as in-use. No
 * effect while a session runs (they are then that session's) or when
 * nothing was inherited.
 */
MP_PROF_API void mp_profiler_drop_inherited(void);

/** A human sentence for `s`; never NULL. */
MP_PROF_API const char *mp_prof_strerror(mp_prof_status s);

/** Copies the recorder's counters into `out`. */
MP_PROF_API void mp_prof_diagnostics(mp_prof_stats *out);

/**
 * Symbol quality of a profile, by the share of its locations' frames that
 * carry a function name and a file:line.
 *
 * | class | rule (shares over all frames of all locations) |
 * |---|---|
 * | MP_PROF_QUALITY_FULL | functions >= 95% and lines >= 80% |
 * | MP_PROF_QUALITY_FUNCTIONS | functions >= 95% |
 * | MP_PROF_QUALITY_PARTIAL | functions >= 20% |
 * | MP_PROF_QUALITY_ADDRESSES_ONLY | functions < 20% (or no frames) |
 *
 * A frame is one line of a location (inlined functions count one frame
 * each; a location without lines is one frame without a name); it has a
 * function when its function's name is non-empty, and a file:line when
 * that function's file name is non-empty and the line is > 0. The
 * synthetic `[truncated]` frame is not counted. Shares are compared
 * exactly (100 * count >= threshold * frames). The thresholds are fixed by
 * src/report/quality.h and tested on both sides of each boundary.
 */
typedef enum mp_prof_symbol_quality {
    MP_PROF_QUALITY_ADDRESSES_ONLY = 0,
    MP_PROF_QUALITY_PARTIAL = 1,
    MP_PROF_QUALITY_FUNCTIONS = 2,
    MP_PROF_QUALITY_FULL = 3
} mp_prof_symbol_quality;

/**
 * Classifies an encoded (uncompressed) pprof by symbol quality.
 * @return MP_PROF_OK and `*out`, or MP_PROF_E_INVALID_CONFIG when the bytes
 *         are not a decodable profile.
 */
MP_PROF_API mp_prof_status mp_prof_classify_symbols(const uint8_t *pprof, size_t len,
                                                    mp_prof_symbol_quality *out);

/** "FULL", "FUNCTIONS", "PARTIAL" or "ADDRESSES_ONLY". */
MP_PROF_API const char *mp_prof_symbol_quality_name(mp_prof_symbol_quality q);

/**
 * The human name of a linkage (mangled) name, by the rule reports use for
 * `Function.name` (the linkage name itself is `Function.system_name`):
 *
 * - C++ (Itanium ABI) and Rust (legacy and v0) names are demangled and
 *   fully qualified, with template arguments, lambdas and anonymous
 *   namespaces as the compiler names them, e.g.
 *   @verbatim
     _ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE
         -> shop::Cache<shop::Item>::put
     _ZZN4shop4fillEmENKUlmE_clEm
         -> shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()
     _Znwm -> operator new
     @endverbatim
 * - the function's own parameter list, return type and clone suffix
 *   (`.cold`, `.constprop.0`) are left out, as `go tool pprof
 *   -symbolize=demangle=templates` shows names: Pyroscope and the flame
 *   graphs group frames by the
 *   name string, so an overload set (`put(std::string const&)`,
 *   `put(int)`) and a function's compiler clones are one node, while
 *   different template instantiations stay apart. The full signature is
 *   the demangling of `system_name`;
 * - every other name (C, already demangled) is not mangled: the call
 *   answers MP_PROF_E_NOT_MANGLED and the name stays as it is. So does a
 *   name the demangler refuses, longer than 1024 bytes, or whose human
 *   form would be longer than 16 KiB (back-references let a short name
 *   print exponentially much; the bound keeps each name to microseconds),
 *   and a Rust v0 name past its demangler's work or nesting bound.
 *
 * The demanglers (GNU libiberty's callback API, linked in, for C++ and
 * Rust legacy names; this library's own for Rust v0 names, with
 * rustc-demangle's alternate output: `std::rt::lang_start_internal`)
 * allocate nothing and take no lock: they are safe in any thread of a
 * profiled process, and reentrant.
 *
 * @param name  a NUL-terminated linkage name
 * @param out   receives the human name, NUL-terminated; when `*len >= cap`
 *              it holds a truncated prefix (as snprintf): call again with
 *              at least `*len + 1` bytes
 * @param cap   bytes at `out` (0: only the length is wanted; `out` may
 *              then be NULL)
 * @param len   receives the length of the whole human name
 * @return MP_PROF_OK; MP_PROF_E_NOT_MANGLED (`out` untouched);
 *         MP_PROF_E_UNSUPPORTED in a build without the `demangle` feature,
 *         for a name other than Rust v0 (reports then carry linkage names); MP_PROF_E_INVALID_CONFIG for
 *         a NULL `name`/`len`, or NULL `out` with `cap` > 0.
 */
MP_PROF_API mp_prof_status mp_prof_demangle(const char *name, char *out, size_t cap, size_t *len);

/** Which frames a report drops from the leaf end of its stacks. */
typedef enum mp_prof_drop_mode {
    /** The allocator's entry points (mp_prof_drop_frames_default()) and
     *  the caller's own pattern, if any: the default. */
    MP_PROF_DROP_ALLOCATOR = 0,
    /** Nothing: every frame is kept, and no `drop_frames` is written. */
    MP_PROF_DROP_NOTHING = 1
} mp_prof_drop_mode;

/**
 * The frames every report of this process drops from the leaf end of its
 * stacks, so that the allocation site, not the allocator's entry point,
 * is the leaf: `malloc` and its family, every `operator new`/`new[]`
 * overload, the C++ standard libraries' allocator wrappers, Rust's
 * `__rust_alloc`, `alloc::alloc::*` and `alloc::raw_vec::*`.
 *
 * The rule is pprof's (`Profile.Prune`, which `go tool pprof` applies to
 * the profile's `drop_frames`): in each stack, from the root towards the
 * leaf, the first frame (physical or inlined) whose function name,
 * without a parameter list, matches the pattern as a whole is dropped
 * with every frame beneath it; a stack made of matching frames only is
 * kept whole. Reports name their pattern in the profile's `drop_frames`,
 * so other tools agree; a report without names (`symbolize=none`) drops
 * nothing itself and leaves it to the server's symbolizer.
 *
 * Process-wide: applies to the reports, peaks, heap images' pprof and
 * foreign pprof built after the call, in any thread.
 *
 * @param extra  NULL or "": the default set only; else a POSIX extended
 *               regular expression (alternation, `.*`, classes: what Go's
 *               RE2 reads alike) added to it: your own wrappers
 *               (`xmalloc|g_malloc|arena_alloc`)
 * @param mode   MP_PROF_DROP_NOTHING keeps every frame (`extra` ignored)
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG when `extra` is not a
 *         regular expression or longer than 4096 bytes, or `mode` is
 *         unknown (the setting is then unchanged); MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_set_drop_frames(const char *extra, mp_prof_drop_mode mode);

/** The default pattern of mp_prof_set_drop_frames() (a static string). */
MP_PROF_API const char *mp_prof_drop_frames_default(void);

/** The version of the mimprof-profiling package, e.g. "0.1.0". */
MP_PROF_API const char *mp_prof_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_PROFILING_H */
