/* SPDX-License-Identifier: MIT */
/**
 * @file profiling_control.h
 * @brief Control of a running process: the `mimprof ctl` socket and Go's
 *        /debug/pprof endpoints, served by the profiling library itself.
 *
 * A program that links libmimprof-profiling (and instantiates a sampling
 * allocator, <mimprof/sampling.h>) opens one *control* and runs
 * *dormant*: no session, the allocation path is the sampling allocator's
 * idle fast path. From then on, while it runs:
 *
 * - `mimprof ctl PID status|start|stop|report -o FILE|image -o FILE|set
 *   interval SIZE` reach it over the abstract Unix socket
 *   `@mimprof-ctl.<pid>`; only the process's own user (SO_PEERCRED) and
 *   root may connect, another user's connection is refused and logged
 *   once;
 * - `go tool pprof http://ADDR:PORT/debug/pprof/heap` (and Grafana
 *   Alloy's `pyroscope.scrape`, Parca) read `/debug/pprof/heap` and
 *   `/debug/pprof/allocs` with Go's semantics: gzip-compressed pprof,
 *   inuse_* now, alloc_* cumulative since the session started, no
 *   `__delta__` label, `?seconds=N` (1..60) for a delta profile, and
 *   `/debug/pprof/` listing them. A dormant process answers 503 with the
 *   reason (or starts a session, with mp_prof_control_options::http_starts).
 *
 * It is the library's answer to the profiling package's exclusive
 * session (mp_profiler_start()): without hooks, the control owns the
 * process's session, started and stopped by `start` and `stop` with
 * mp_prof_control_options::config. A host that runs sessions itself (the
 * `mimprof run` preload runtime, with its periodic reporter, report files
 * and Pyroscope uploads) passes mp_prof_control_hooks instead, and the
 * control calls them.
 *
 * The server: one thread, born with every signal blocked and excluded
 * from sampling (mp_prof_thread_exclude()), which runs no code of the
 * program; at most 8 connections for both protocols together (more are
 * answered "busy"), 10 s each from accept to the last byte, non-blocking
 * sockets, bounded requests (a control line of
 * MP_PROF_CONTROL_MAX_REQUEST bytes, HTTP headers of 16 KiB): a slow or
 * hostile client holds a slot for a bounded time and never the thread.
 * Every descriptor (the listeners, a wake-up pipe, the connections) is
 * close-on-exec, moved near the top of the descriptor range and checked
 * by device and inode before each use: a program that closes every
 * descriptor ends the server, never shares a number with it. The
 * program's signals, environment and descriptors are never touched;
 * nothing is written to its file system (the socket is abstract: no file
 * to remove, none left after a crash; the cost is that it belongs to the
 * network namespace, so a container with its own is reached with
 * `nsenter -n`).
 *
 * fork(): the child closes its copies of the descriptors (the parent's
 * server is untouched); it serves a control socket of its own, dormant,
 * when mp_prof_control_options::serve_forked_children says so (or the
 * host's mp_prof_control_hooks::fork_child), never the HTTP port (it is
 * the parent's). exec(): the descriptors are closed; a program that opens
 * a control again after an exec listens under the same name.
 *
 * A host that listens on the process's behalf (mp_prof_control_host:
 * `mimprof run`'s collector binds `@mimprof-ctl.<pid>` and hands over the
 * connections it accepts) leaves the process with no descriptor of the
 * control's own while nobody is connected: no listener, no wake-up pipe;
 * the thread waits in the host's take(). The connections it hands over
 * are served as accepted ones (the same user check, bounds and
 * deadlines).
 *
 * One control per process at a time.
 *
 * @code
 * #include <mimprof/profiling_control.h>
 *
 * int main(void)
 * {
 *     mp_prof_control_options o;
 *     mp_prof_control_options_init(&o);
 *     o.http = "127.0.0.1:6060";              // and the ctl socket (o.ctl)
 *     o.config.sample_interval_bytes = 64 << 10;
 *     mp_prof_control *ctl;
 *     char why[256];
 *     if (mp_prof_control_open(&o, NULL, &ctl, why, sizeof why) != MP_PROF_OK)
 *         fprintf(stderr, "no profiler control: %s\n", why);
 *     serve_requests();                       // dormant until `mimprof ctl PID start`
 *     mp_prof_control_close(ctl);
 * }
 * @endcode
 */
#ifndef MIMPROF_PROFILING_CONTROL_H
#define MIMPROF_PROFILING_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Longest control request, in bytes, without its '\n'. The protocol: one
 * line of words separated by single spaces (`status`, `start
 * [interval=SIZE] [every=DURATION]`, `stop`, `report`, `image`, `set
 * interval=SIZE`; SIZE like 64k or 1m, DURATION like 10s, 500ms or 0),
 * answered by "ok", "ok BYTES" followed by exactly BYTES bytes (the
 * uncompressed pprof of `report`, the heap image of `image`), or
 * "error: REASON"; after "ok", `status`, `start`, `stop` and `set` send
 * "key: value" lines (pid, state, interval, next interval, every,
 * samples, live samples, drops, reports, last report, output, upload,
 * http). The server closes the connection after one answer.
 */
#define MP_PROF_CONTROL_MAX_REQUEST 512u

/** A process's control (opaque; one per process). */
typedef struct mp_prof_control mp_prof_control;

/**
 * Where a control's connections come from when it binds no socket of its
 * own (mp_prof_control_options::host): a host that listens on the
 * process's behalf and hands over the connections it accepts. Both
 * functions are called with `ctx`; take() only on the control's thread.
 */
typedef struct mp_prof_control_host {
    void *ctx; /**< passed to take() and wake() */
    /** Blocks up to timeout_ms (-1: until connections come or wake() is called)
     *  and stores up to max connected AF_UNIX stream sockets in fds: the
     *  control owns them from then on. Returns how many (0: none, or woken),
     *  or -1 when the host is gone for good (the control thread then ends).
     *  A wake() that comes before take() blocks must make that take()
     *  return too (no wake-up is lost between the control's check of its
     *  stop flag and its call). */
    int (*take)(void *ctx, int *fds, int max, int timeout_ms);
    /** Makes a blocked take() return soon; called from any thread. */
    void (*wake)(void *ctx);
} mp_prof_control_host;

/** What the control serves; start from mp_prof_control_options_init(). */
typedef struct mp_prof_control_options {
    /** Serve the control socket `@mimprof-ctl.<pid>` (default true). */
    bool ctl;
    /** Serve /debug/pprof on this address (copied): `ADDR:PORT`,
     *  `[V6]:PORT`, `:PORT` or `PORT` (127.0.0.1); ADDR numeric or
     *  `localhost`; port 0 picks a free one (see
     *  mp_prof_control_http_address()). NULL (default): no HTTP endpoint. */
    const char *http;
    /** Allow a wildcard address (0.0.0.0, [::]) in `http`: refused by
     *  default, since it exposes the heap to every interface. */
    bool http_wildcard;
    /** A profile request to a dormant process starts a session (with
     *  `config`) instead of answering 503. Default false: a scraper's
     *  retry loop then never switches profiling on by itself. */
    bool http_starts;
    /** A forked child serves a control socket of its own (dormant; the
     *  parent's session is never the child's). Default false: children
     *  have none. Ignored when the hooks have a fork_child. */
    bool serve_forked_children;
    /** No message on stderr (default false). Without a log hook the
     *  only message is the one line about a refused user. */
    bool quiet;
    /** With `ctl`: the connections of the control socket come from this
     *  host, and the control binds no socket and makes no wake-up pipe
     *  (its thread waits in host->take(), and is stopped by
     *  host->wake()). Not with `http` (MP_PROF_E_INVALID_CONFIG). Only
     *  the pointer is kept: the host must outlive the control (until
     *  mp_prof_control_close() returns), and in a forked child that
     *  serves (serve_forked_children, mp_prof_control_hooks::fork_child)
     *  the child's control uses the same host, which must be ready for it
     *  by then (its own fork handler runs before the control's). NULL
     *  (default): the control listens itself. */
    const mp_prof_control_host *host;
    /** The configuration of the sessions `start` begins without hooks;
     *  `start interval=SIZE` and `set interval=SIZE` change its
     *  sample_interval_bytes. Default: mp_prof_config_init()'s. */
    mp_prof_config config;
} mp_prof_control_options;

/** Fills `o` with the defaults (ctl socket on, no HTTP). */
MP_PROF_API void mp_prof_control_options_init(mp_prof_control_options *o);

/** What `status` says of the session (mp_prof_control_hooks::state). */
typedef struct mp_prof_control_state {
    bool running;           /**< a session runs (else: dormant) */
    uint64_t interval;      /**< of the running session, else of the next start */
    uint64_t next_interval; /**< of the next start */
    uint64_t every_ms;      /**< period of the host's reports; 0: only on request */
    bool report_at_exit;    /**< the host writes a last report at exit */
    unsigned reports;       /**< reports taken by this process */
    int64_t last_report_ns; /**< wall clock (CLOCK_REALTIME) of the last one; 0: none */
    const char *output;     /**< where the host writes reports; NULL or "": nowhere */
    char upload[256];       /**< the host's upload state in one line; "": off */
} mp_prof_control_state;

/**
 * What a host that runs the sessions itself supplies. Every operation
 * runs on the control's thread (signals blocked, sampling excluded), one
 * at a time; `why` receives a one-line reason with any status other than
 * MP_PROF_OK, which the client shows as "error: REASON". Either none of
 * them is given (no hooks) or all of state, start, stop, report, image
 * and set_interval are; fork_child and log are optional.
 */
typedef struct mp_prof_control_hooks {
    void *ctx; /**< passed to every hook */
    /** Fills `st` (zeroed before) with the state now. */
    void (*state)(void *ctx, mp_prof_control_state *st);
    /** Starts a session; `interval` 0: the configured one; `every_ms` < 0:
     *  the configured period. */
    mp_prof_status (*start)(void *ctx, uint64_t interval, int64_t every_ms, char *why,
                            size_t whylen);
    /** Ends the session (dormant again). */
    mp_prof_status (*stop)(void *ctx, char *why, size_t whylen);
    /**
     * A report now, as uncompressed pprof released with
     * mp_prof_buffer_free(). The host hands it to
     * mp_prof_control_feed() as it does with every report it takes, and
     * calls `then(then_ctx)` (when not NULL) right after, while nothing
     * else can feed (the HTTP endpoint encodes its profile there).
     */
    mp_prof_status (*report)(void *ctx, uint8_t **pprof, size_t *len, void (*then)(void *),
                             void *then_ctx, char *why, size_t whylen);
    /** A heap image now (mp_profiler_write_image()) at `path`, a file in
     *  a private directory the control made and removes. */
    mp_prof_status (*image)(void *ctx, const char *path, char *why, size_t whylen);
    /** The interval of the next session. */
    void (*set_interval)(void *ctx, uint64_t interval);
    /** In a forked child, after the host's own fork handlers: whether the
     *  child serves its own control socket. NULL: the option decides. */
    bool (*fork_child)(void *ctx);
    /** One line (with its '\n') for the host's log. NULL: stderr, unless
     *  quiet. */
    void (*log)(void *ctx, const char *line);
} mp_prof_control_hooks;

/**
 * Opens this process's control: binds what `o` asks for (nothing with
 * a host), then starts the server thread. With `hooks` NULL, `start`
 * and `stop` begin and end a session of the control's own
 * (mp_profiler_start() with `o->config`), `report` is
 * mp_profiler_report(), `image` mp_profiler_write_image(); `start
 * every=DURATION` is refused (there is no periodic reporter); a
 * session that is running when the control closes is stopped. Either way
 * nothing starts a session until asked: the process is dormant.
 * @param o       what to serve (copied, with the string it points to)
 * @param hooks   the host's session operations (copied), or NULL
 * @param out     receives the control
 * @param why     receives a one-line reason with any status but
 *                MP_PROF_OK (may be NULL when `whylen` is 0)
 * @param whylen  bytes at `why`
 * @return MP_PROF_OK and `*out`; MP_PROF_E_INVALID_CONFIG (NULL `o` or
 *         `out`, neither endpoint asked for, a malformed or refused
 *         wildcard address, hooks incomplete, a host without take() or
 *         wake(), a host with `http`); MP_PROF_E_BUSY (a control
 *         is open in this process); MP_PROF_E_IO (a socket could not be
 *         bound: the name or port is taken); MP_PROF_E_NOMEM (no thread
 *         or descriptor). Nothing is left open on failure.
 */
MP_PROF_API mp_prof_status mp_prof_control_open(const mp_prof_control_options *o,
                                                const mp_prof_control_hooks *hooks,
                                                mp_prof_control **out, char *why, size_t whylen);

/**
 * Stops the server thread (it finishes no pending answer; with a host,
 * it is woken with mp_prof_control_host::wake()), closes the sockets
 * and, without hooks, stops the control's session (no last
 * report). In a forked child that serves nothing it only releases `c`.
 * NULL is a no-op.
 */
MP_PROF_API void mp_prof_control_close(mp_prof_control *c);

/**
 * Where the HTTP endpoint listens, as "HOST:PORT" with the port bound
 * (IPv6 as "[ADDR]:PORT"); NULL when it is not served (also in a forked
 * child). Valid until mp_prof_control_close().
 */
MP_PROF_API const char *mp_prof_control_http_address(const mp_prof_control *c);

/**
 * For a host: a session has started (the HTTP endpoint's cumulative
 * alloc_* values begin again). Call it where reports are serialised, as
 * mp_prof_control_feed(). A no-op without an HTTP endpoint.
 */
MP_PROF_API void mp_prof_control_session_started(mp_prof_control *c);

/**
 * For a host: one report it took (uncompressed pprof of
 * mp_profiler_report()). Every report of the session must be fed, in
 * order and one at a time: each report's alloc_* values cover the window
 * since the previous one, and the HTTP endpoint adds them up. A no-op
 * without an HTTP endpoint.
 * @return MP_PROF_OK; MP_PROF_E_INVALID_CONFIG (not a mimprof report);
 *         MP_PROF_E_NOMEM.
 */
MP_PROF_API mp_prof_status mp_prof_control_feed(mp_prof_control *c, const uint8_t *pprof,
                                                size_t len);

/**
 * The abstract socket name of the control of process `pid` (as that
 * process sees its own pid) into `out`: a NUL byte, then
 * "mimprof-ctl.<pid>" (not NUL-terminated), what a client copies into
 * sun_path. @return its length (the leading NUL included), 0 when `cap`
 * is too small.
 */
MP_PROF_API size_t mp_prof_control_socket_name(long pid, char *out, size_t cap);

/**
 * Checks an address for mp_prof_control_options::http without binding
 * it (what `mimprof run --http` does before the program starts).
 * @return MP_PROF_OK, or MP_PROF_E_INVALID_CONFIG with the reason in `why`.
 */
MP_PROF_API mp_prof_status mp_prof_control_check_http(const char *spec, bool wildcard_ok, char *why,
                                                      size_t whylen);

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_PROFILING_CONTROL_H */
