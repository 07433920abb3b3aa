/* SPDX-License-Identifier: MIT */
/**
 * @file pyroscope.h
 * @brief mimprof-pyroscope: scheduled heap-profile uploads to Grafana
 *        Pyroscope, with auth, tenant, labels and no silent loss.
 *
 * Overview
 * --------
 * A *backend* (mp_pyro_backend) produces one uncompressed pprof per
 * report: the mimprof profiler (mp_pyro_backend_mimprof_new()), jemalloc's
 * own heap profiler (mp_pyro_backend_jemalloc_new()), or any vtable the
 * caller supplies (mp_pyro_backend_new()).
 *
 * An *agent* (mp_pyro_agent) runs two background threads: the reporter
 * asks the backend for a profile at every multiple of
 * `upload_interval_ms` of the wall clock and queues it with its
 * `from`/`until`; the uploader sends the queue, oldest first, to
 * `POST /ingest` (multipart, gzipped `profile` file part) or to
 * `POST /push.v1.PusherService/Push` (Connect, protobuf). 429, 5xx,
 * timeouts and connection errors are retried with exponential backoff and
 * jitter within a budget; other 4xx are not retried. The queue is
 * bounded; an optional spool directory keeps undeliverable profiles on
 * disk and resends them, also after a restart. Every profile ends in
 * exactly one counter of mp_pyro_stats.
 *
 * Configuration is an opaque mp_pyro_config built with setters and/or
 * mp_pyro_config_from_env() (the PYROSCOPE_* names the official clients
 * use). Names and labels follow Pyroscope's validation rules and are
 * checked when they are set and again when an agent starts, so a bad
 * configuration is a typed error then, never a 400 later.
 *
 * Threading: a config is used by one thread at a time; an agent's
 * functions may be called from any thread. Nothing here may be called
 * from an allocation hook.
 *
 * Errors are a typed enum (mp_pyro_status) with mp_pyro_strerror();
 * functions that can fail for a reason worth a sentence also keep it
 * (mp_pyro_config_error(), mp_pyro_agent_last_error()).
 */
#ifndef MIMPROF_PYROSCOPE_H
#define MIMPROF_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks what libmimprof-pyroscope exports: the library is built with
 *  hidden visibility, so everything else in it is internal. */
#if defined(__GNUC__)
#define MP_PYRO_API __attribute__((visibility("default")))
#else
#define MP_PYRO_API
#endif

/* ------------------------------------------------------------------ */
/** @name Status                                                      */
/* ------------------------------------------------------------------ */
/**@{*/

/** Status of a mimprof-pyroscope call. */
typedef enum mp_pyro_status {
    MP_PYRO_OK = 0,                 /**< success */
    MP_PYRO_E_INVALID_ARGUMENT = 1, /**< a NULL or out-of-range argument */
    MP_PYRO_E_INVALID_CONFIG = 2,   /**< a config field is out of range or conflicts with another */
    MP_PYRO_E_INVALID_URL = 3,      /**< the server URL is not an absolute http(s) URL */
    MP_PYRO_E_INVALID_NAME = 4,     /**< the application (service) name breaks Pyroscope's rules */
    MP_PYRO_E_INVALID_LABEL = 5,    /**< a tag name or value breaks Pyroscope's rules */
    MP_PYRO_E_TOO_MANY_LABELS = 6,  /**< more labels than Pyroscope accepts per series */
    MP_PYRO_E_NOT_CONFIGURED = 7,   /**< no server address or application name was given */
    MP_PYRO_E_NOMEM = 8,            /**< out of memory */
    MP_PYRO_E_BACKEND = 9,          /**< the backend failed to start or to report */
    MP_PYRO_E_UNSUPPORTED =
        10,                 /**< not built into this library, or not available in this process */
    MP_PYRO_E_STATE = 11,   /**< wrong state (agent stopped, backend already running) */
    MP_PYRO_E_CONNECT = 12, /**< could not resolve, connect, send or receive (retryable) */
    MP_PYRO_E_TIMEOUT = 13, /**< the request timed out (retryable) */
    MP_PYRO_E_TLS = 14,     /**< TLS handshake or certificate verification failed */
    MP_PYRO_E_HTTP_REJECTED =
        15, /**< the server rejected the request: 4xx other than 429, or a redirect */
    MP_PYRO_E_HTTP_RATE_LIMITED = 16, /**< HTTP 429 (retryable) */
    MP_PYRO_E_HTTP_SERVER = 17,       /**< HTTP 5xx (retryable) */
    MP_PYRO_E_IO = 18,                /**< a spool or temporary file could not be read or written */
    MP_PYRO_E_SPOOL_LOCKED = 19,      /**< another agent holds the spool directory */
    MP_PYRO_E_DEADLINE = 20, /**< stop: profiles were left undelivered at the flush deadline */
    MP_PYRO_E_INTERNAL = 21  /**< an internal invariant failed (a bug) */
} mp_pyro_status;

/** A human sentence for `s`; never NULL. */
MP_PYRO_API const char *mp_pyro_strerror(mp_pyro_status s);

/** True for the statuses an uploader retries (connect, timeout, 429, 5xx). */
MP_PYRO_API bool mp_pyro_status_is_retryable(mp_pyro_status s);

/** The version of the mimprof-pyroscope package, e.g. "0.1.0". */
MP_PYRO_API const char *mp_pyro_version(void);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name Configuration                                               */
/* ------------------------------------------------------------------ */
/**@{*/

/** Which ingestion endpoint the agent uses. */
typedef enum mp_pyro_protocol {
    /** `POST /ingest?name=app{tags}&from=&until=&spyName=`, multipart body
     *  with one gzipped `profile` *file* part (filename set), no `format`
     *  parameter. The server marks the series `__delta__="false"`. */
    MP_PYRO_PROTOCOL_INGEST = 0,
    /** `POST /push.v1.PusherService/Push` (Connect, `application/proto`):
     *  one series with labels `__name__="memory"`, `service_name`,
     *  `__delta__="false"` and the tags; `raw_profile` gzipped. */
    MP_PYRO_PROTOCOL_PUSH = 1
} mp_pyro_protocol;

/** Severity of a log line. */
typedef enum mp_pyro_log_level {
    MP_PYRO_LOG_ERROR = 0, /**< a profile was dropped or a thread cannot work */
    MP_PYRO_LOG_WARN = 1,  /**< a failure that will be retried, spooling */
    MP_PYRO_LOG_INFO = 2,  /**< start, stop, spool resends */
    MP_PYRO_LOG_DEBUG = 3  /**< every request */
} mp_pyro_log_level;

/**
 * A log sink. Called from the agent's threads; must not call back into
 * the agent. `message` is valid for the duration of the call.
 */
typedef void (*mp_pyro_log_fn)(void *user, mp_pyro_log_level level, const char *message);

/** Upload configuration (opaque). */
typedef struct mp_pyro_config mp_pyro_config;

/**
 * Creates a configuration with the defaults: protocol ingest, upload
 * interval 10 s, connect timeout 5 s, request timeout 10 s, queue of 16
 * profiles, retry 1 s doubling to 30 s with jitter, at most 8 attempts
 * within 120 s, flush deadline 5 s at stop, no spool, log level WARN to
 * stderr. Server URL and application name have no default.
 * @return MP_PYRO_OK and `*out`, or MP_PYRO_E_NOMEM.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_new(mp_pyro_config **out);

/** Releases `cfg` (wiping secrets). NULL is a no-op. */
MP_PYRO_API void mp_pyro_config_free(mp_pyro_config *cfg);

/** A deep copy of `cfg` in `*out`. @return MP_PYRO_OK or MP_PYRO_E_NOMEM. */
MP_PYRO_API mp_pyro_status mp_pyro_config_copy(const mp_pyro_config *cfg, mp_pyro_config **out);

/**
 * The sentence explaining the last error a setter, mp_pyro_config_from_env()
 * or mp_pyro_config_validate() returned for `cfg` ("" when none). Valid
 * until the next call on `cfg`.
 */
MP_PYRO_API const char *mp_pyro_config_error(const mp_pyro_config *cfg);

/**
 * Server base URL, e.g. `http://localhost:4040` or
 * `https://profiles-prod-001.grafana.net`. Must be absolute http or https
 * with a host; a path prefix is kept (`/ingest` is appended to it). A
 * `user:password@` part becomes Basic auth (unless Basic auth is set
 * explicitly) and is removed from the URL.
 * @return MP_PYRO_E_INVALID_URL with a sentence in mp_pyro_config_error().
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_server(mp_pyro_config *cfg, const char *url);

/**
 * Application (service) name: non-empty, at most 1024 bytes, characters
 * `[A-Za-z0-9_.-/]`. It becomes `service_name`.
 * @return MP_PYRO_E_INVALID_NAME otherwise.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_app_name(mp_pyro_config *cfg, const char *name);

/**
 * Adds a static tag (series label) `name=value`. Name: `[A-Za-z_][A-Za-z0-9_]*`
 * (the rule that Pyroscope 1.13 and 2.0 both store as written: 1.13
 * refuses a leading digit and rewrites `.` to `_`),
 * 1..1024 bytes, not starting with `__` (reserved), not `service_name`
 * (use the application name) and not already set. Value: 1..2048 bytes of
 * valid UTF-8 without `,` `}` control characters or leading/trailing
 * blanks (the server would cut or trim it). At most
 * MP_PYRO_MAX_TAGS tags.
 * @return MP_PYRO_E_INVALID_LABEL or MP_PYRO_E_TOO_MANY_LABELS otherwise.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_add_tag(mp_pyro_config *cfg, const char *name,
                                                  const char *value);

/**
 * Adds tags written `k=v,k2=v2` (the PYROSCOPE_TAGS and `--tag` syntax;
 * blanks around items are ignored; an empty string adds nothing). All or
 * nothing: on error no tag of `list` is added.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_add_tags(mp_pyro_config *cfg, const char *list);

/**
 * Tags per series at most: Pyroscope accepts 30 label names per series and
 * the server adds up to 4 of its own (`__name__`, `service_name`,
 * `__delta__`, `pyroscope_spy`).
 */
#define MP_PYRO_MAX_TAGS 26

/**
 * HTTP Basic auth (Grafana Cloud: user = stack id, password = token).
 * NULL `user` clears it. Conflicts with a bearer token (checked at
 * validation).
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_basic_auth(mp_pyro_config *cfg, const char *user,
                                                         const char *password);

/** Bearer token (`Authorization: Bearer <token>`); NULL clears it. */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_bearer_token(mp_pyro_config *cfg, const char *token);

/**
 * Tenant id sent as `X-Scope-OrgID` (multi-tenant servers); NULL clears
 * it. 1..150 characters of `[A-Za-z0-9!-_.*'()]`, not `.` or `..` (the
 * tenant ID rules of Pyroscope's multi-tenancy).
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_tenant(mp_pyro_config *cfg, const char *tenant);

/**
 * Adds an extra request header. `name` is an HTTP token; `value` has no
 * CR, LF or NUL. `Authorization`, `X-Scope-OrgID`, `Content-Type`,
 * `Content-Length` and `Host` are refused (use the dedicated setters).
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_add_header(mp_pyro_config *cfg, const char *name,
                                                     const char *value);

/** Selects the ingestion endpoint (default MP_PYRO_PROTOCOL_INGEST). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_protocol(mp_pyro_config *cfg,
                                                       mp_pyro_protocol protocol);

/**
 * Report period in milliseconds, 10 .. 1,800,000 (default 10,000).
 * Reports happen when the wall clock crosses a multiple of it. Pyroscope
 * refuses a profile whose timestamp (the window's start) is more than
 * 1 h old (`validation.reject-older-than`), so a window may last at most
 * half of that: the other half is left for retries and the spool.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_upload_interval_ms(mp_pyro_config *cfg, uint32_t ms);

/** Connect and whole-request timeouts in ms (defaults 5,000 and 10,000; each 1..600,000). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_timeouts_ms(mp_pyro_config *cfg, uint32_t connect_ms,
                                                          uint32_t request_ms);

/** CA bundle (PEM file) used to verify the server; NULL = the system's. */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_ca_path(mp_pyro_config *cfg, const char *path);

/** Profiles held in memory waiting for upload, 1..4096 (default 16). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_queue_capacity(mp_pyro_config *cfg,
                                                             uint32_t profiles);

/** Retry policy of one profile. */
typedef struct mp_pyro_retry_policy {
    uint32_t max_attempts; /**< attempts per profile including the first, 1..1000 (default 8) */
    uint32_t initial_backoff_ms; /**< delay before the 2nd attempt, 1..3,600,000 (default 1,000) */
    uint32_t max_backoff_ms;     /**< cap of the doubling delay, >= initial (default 30,000) */
    uint32_t budget_ms; /**< give up when the next attempt would start later than this after the
                           first (default 120,000) */
} mp_pyro_retry_policy;

/** Sets the retry policy; each delay is drawn uniformly in [d/2, d] (jitter). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_retry(mp_pyro_config *cfg,
                                                    const mp_pyro_retry_policy *policy);

/**
 * The server's per-tenant limits, which every request must fit; the
 * defaults are Pyroscope's (1.13 and 2.0 alike). A report beyond them is
 * sent as several profiles of the same window, each within the limits,
 * that together hold every sample exactly once (Pyroscope sums the
 * profiles of a series over a query's time range). 0 = no limit.
 */
typedef struct mp_pyro_server_limits {
    uint32_t max_samples;       /**< `validation.max-profile-stacktrace-samples` (16,000) */
    uint32_t max_profile_bytes; /**< `validation.max-profile-size-bytes`, uncompressed (4 MiB) */
    uint32_t burst_bytes;       /**< `distributor.ingestion-burst-size-mb` in bytes (2 MiB): the
                                     rate limiter, which counts a request's uncompressed profile
                                     and label bytes, refuses anything larger at any rate */
} mp_pyro_server_limits;

/** Sets the limits of the server (see mp_pyro_server_limits). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_server_limits(mp_pyro_config *cfg,
                                                            const mp_pyro_server_limits *limits);

/** How long mp_pyro_agent_stop() keeps trying to deliver, in ms (0..600,000; default 5,000). */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_flush_deadline_ms(mp_pyro_config *cfg, uint32_t ms);

/**
 * Spool directory (created if missing, mode 0700) for profiles that could
 * not be delivered: queue overflow, retry budget exhausted, a TLS or
 * other local failure, or the stop deadline. Spooled profiles are resent,
 * oldest first, whenever the queue is idle, also by the next agent that
 * uses the directory. At most `max_bytes` are kept (the oldest files are
 * evicted and counted); files older than `max_age_s` are deleted and
 * counted (Pyroscope rejects profiles whose timestamp, the window's start,
 * is older than 1 h; the age is measured from there). Each file keeps the
 * server, the tenant and a salted SHA-256 of the credentials (Basic,
 * bearer, extra headers) it was meant for, never the credentials: only an
 * agent with the same three resends it; others keep it and count it in
 * `spool_foreign`. One agent at a time uses a directory.
 * @param cfg the configuration.
 * @param dir the directory; NULL disables the spool.
 * @param max_bytes 0 = default 64 MiB.
 * @param max_age_s 0 = default 3300 s (55 min); at most 3300.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_spool(mp_pyro_config *cfg, const char *dir,
                                                    uint64_t max_bytes, uint32_t max_age_s);

/** Log sink and threshold; `fn` NULL restores stderr. */
MP_PYRO_API mp_pyro_status mp_pyro_config_set_logger(mp_pyro_config *cfg, mp_pyro_log_level level,
                                                     mp_pyro_log_fn fn, void *user);

/**
 * Reads the environment variables the Pyroscope clients use, each
 * optional (unset or empty = keep the current value):
 *
 * | variable | effect |
 * |---|---|
 * | `PYROSCOPE_SERVER_ADDRESS` | mp_pyro_config_set_server() |
 * | `PYROSCOPE_APPLICATION_NAME` | mp_pyro_config_set_app_name() |
 * | `PYROSCOPE_BASIC_AUTH_USER`, `PYROSCOPE_BASIC_AUTH_PASSWORD` | mp_pyro_config_set_basic_auth()
 * | | `PYROSCOPE_AUTH_TOKEN` | mp_pyro_config_set_bearer_token() | | `PYROSCOPE_TENANT_ID` |
 * mp_pyro_config_set_tenant() | | `PYROSCOPE_TAGS` | mp_pyro_config_add_tags(), `k=v,k=v` | |
 * `PYROSCOPE_UPLOAD_INTERVAL` | interval: `10s`, `500ms`, `1m` or plain seconds | |
 * `MIMPROF_PYROSCOPE_PROTOCOL` | `ingest` or `push` | | `MIMPROF_PYROSCOPE_SPOOL_DIR` |
 * mp_pyro_config_set_spool() with default bounds | | `MIMPROF_PYROSCOPE_CA_PATH` |
 * mp_pyro_config_set_ca_path() | | `MIMPROF_PYROSCOPE_FLUSH_DEADLINE` |
 * mp_pyro_config_set_flush_deadline_ms(): `2s`, `500ms`, `0` | | `MIMPROF_PYROSCOPE_LOG_LEVEL` |
 * `error`, `warn`, `info` or `debug` (to stderr) | | `MIMPROF_PYROSCOPE_LIMITS` |
 * mp_pyro_config_set_server_limits(): `samples=N,bytes=N,burst=N`, any subset |
 *
 * @return the first error met (its variable named in
 *         mp_pyro_config_error()); the variables before it are applied.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_from_env(mp_pyro_config *cfg);

/**
 * Writes `cfg` back as the environment variables read by
 * mp_pyro_config_from_env() (setenv; unset fields are unset), so that a
 * launcher (`mimprof run --pyroscope ...`) can validate its flags here and
 * hand them to the child process. Not thread-safe (setenv).
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_export_env(const mp_pyro_config *cfg);

/**
 * Checks the whole configuration: server and application name present,
 * not both Basic auth and a bearer token, label count, numeric ranges.
 * mp_pyro_agent_start() and mp_pyro_upload() call it.
 */
MP_PYRO_API mp_pyro_status mp_pyro_config_validate(mp_pyro_config *cfg);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name Backends                                                    */
/* ------------------------------------------------------------------ */
/**@{*/

/** The window a report covers (wall clock, ns since the epoch). */
typedef struct mp_pyro_window {
    int64_t from_nanos;  /**< start (the previous report, or the agent's start) */
    int64_t until_nanos; /**< end (now, a multiple of the interval except at stop) */
} mp_pyro_window;

/** Flags of a reported profile. */
enum {
    /** The profile holds per-interval `alloc_*` values (samples labelled
     *  `__delta__="false"`), not cumulative ones. */
    MP_PYRO_PROFILE_INTERVAL = 1u << 0,
    /** The profile holds a live snapshot (`inuse_*`). */
    MP_PYRO_PROFILE_LIVE = 1u << 1
};

/** One report of a backend. */
typedef struct mp_pyro_profile {
    uint8_t *pprof; /**< uncompressed pprof bytes, owned by the backend until release() */
    size_t len;     /**< length of `pprof`; 0 = nothing to upload this time */
    unsigned flags; /**< MP_PYRO_PROFILE_* */
    void *opaque;   /**< for the backend's release() */
} mp_pyro_profile;

/** The operations of a backend; every pointer is required. */
typedef struct mp_pyro_backend_ops {
    /** Short name, used as `spyName` / `pyroscope_spy` (e.g. "mimprof"). */
    const char *(*name)(void *state);
    /** Starts profiling (called by mp_pyro_agent_start()). */
    mp_pyro_status (*start)(void *state);
    /** Produces the profile of `window` into `out` (zeroed by the caller). */
    mp_pyro_status (*report)(void *state, const mp_pyro_window *window, mp_pyro_profile *out);
    /** Releases what report() put in `p`. */
    void (*release)(void *state, mp_pyro_profile *p);
    /** Stops profiling (called by mp_pyro_agent_stop() after the final report). */
    mp_pyro_status (*stop)(void *state);
    /** Frees `state` (called by mp_pyro_backend_free()). */
    void (*destroy)(void *state);
} mp_pyro_backend_ops;

/** A profile source (opaque). */
typedef struct mp_pyro_backend mp_pyro_backend;

/**
 * Wraps a caller-supplied vtable. `ops` must stay valid for the backend's
 * life; `state` is passed to every operation.
 */
MP_PYRO_API mp_pyro_status mp_pyro_backend_new(const mp_pyro_backend_ops *ops, void *state,
                                               mp_pyro_backend **out);

/** Destroys `b` (calls destroy()). It must not be in use by an agent. NULL is a no-op. */
MP_PYRO_API void mp_pyro_backend_free(mp_pyro_backend *b);

/** The backend's name(). */
MP_PYRO_API const char *mp_pyro_backend_name(const mp_pyro_backend *b);

/** A sentence on the backend's last failure ("" when none). */
MP_PYRO_API const char *mp_pyro_backend_error(const mp_pyro_backend *b);

/** mimprof-profiling's session configuration (<mimprof/profiling.h>). */
struct mp_prof_config;
/** mimprof-profiling's session handle (<mimprof/profiling.h>). */
struct mp_profiler;

/**
 * The mimprof profiler as a backend that owns its session: start() calls
 * mp_profiler_start(cfg) (NULL = mp_prof_config_init() defaults), report()
 * mp_profiler_report(), stop() mp_profiler_stop() and frees the session.
 * Profiles carry interval (`alloc_*`, `__delta__="false"`) and live
 * (`inuse_*`) values, already unbiased by the profiler: nothing is
 * rescaled here. The profiler's own errors come back as MP_PYRO_E_BACKEND
 * (or NOMEM/STATE/UNSUPPORTED) with mp_prof_strerror()'s sentence in
 * mp_pyro_backend_error().
 */
MP_PYRO_API mp_pyro_status mp_pyro_backend_mimprof_new(const struct mp_prof_config *cfg,
                                                       mp_pyro_backend **out);

/**
 * The mimprof profiler as a backend over a session the caller already
 * runs (the LD_PRELOAD object): report() calls mp_profiler_report(p);
 * start() and stop() do not touch the session, which must outlive the
 * backend.
 */
MP_PYRO_API mp_pyro_status mp_pyro_backend_mimprof_attach(struct mp_profiler *p,
                                                          mp_pyro_backend **out);

/** Signature of jemalloc's mallctl(). */
typedef int (*mp_pyro_mallctl_fn)(const char *name, void *oldp, size_t *oldlenp, void *newp,
                                  size_t newlen);

/** Options of the jemalloc backend. */
typedef struct mp_pyro_jemalloc_options {
    /** jemalloc's mallctl; NULL = look up `mallctl` in the process (dlsym). */
    mp_pyro_mallctl_fn mallctl;
    /** Directory for the temporary heap dump; NULL = $TMPDIR or /tmp. */
    const char *tmp_dir;
    /** Name frames as the mimprof backend does (the profiling library's
     *  symbolizer: ELF .symtab, else .dynsym, names demangled and
     *  qualified, linkage names in Function.system_name); false: addresses
     *  and mappings only. Default true. */
    bool symbolize;
} mp_pyro_jemalloc_options;

/** Fills `opt` with the defaults. */
MP_PYRO_API void mp_pyro_jemalloc_options_init(mp_pyro_jemalloc_options *opt);

/**
 * jemalloc's own heap profiler as a backend, for programs running jemalloc
 * with `MALLOC_CONF=prof:true`: each report writes `prof.dump` to a
 * temporary file, parses the `heap_v2` dump, unbiases it once (jeprof's
 * rule, which jemalloc 5.3 writes its dumps for), attaches the process
 * mappings (dl_iterate_phdr, with GNU build-ids) and encodes pprof
 * `inuse_objects`/`inuse_space` (period type space/bytes, period =
 * 2^lg_prof_sample). start() fails with MP_PYRO_E_UNSUPPORTED when
 * jemalloc or its profiling is absent.
 * @param opt NULL = defaults.
 * @param out receives the backend (free with mp_pyro_backend_free()).
 */
MP_PYRO_API mp_pyro_status mp_pyro_backend_jemalloc_new(const mp_pyro_jemalloc_options *opt,
                                                        mp_pyro_backend **out);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name Agent                                                       */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * Counters of an agent. Every profile a report produces ends in exactly
 * one of `uploaded`, `dropped_*`, `spooled` or is still queued:
 *
 *     reports_queued == uploaded + dropped_queue_full + dropped_rejected
 *                     + dropped_retry_exhausted + dropped_stop_deadline
 *                     + dropped_spool_io + spooled + queue_depth
 *
 * Profiles read back from the spool are counted apart (`spool_*`).
 */
typedef struct mp_pyro_stats {
    uint64_t reports;        /**< backend reports taken, plus submitted profiles */
    uint64_t reports_empty;  /**< reports with nothing to upload */
    uint64_t reports_failed; /**< backend report errors */
    uint64_t reports_queued; /**< profiles put in the queue */
    uint64_t uploaded;       /**< queued profiles the server accepted */
    uint64_t requests;       /**< HTTP requests made (first attempts + retries, queue and spool) */
    uint64_t retries;        /**< requests that were a retry */
    uint64_t bytes_sent;     /**< request body bytes of accepted requests */
    uint64_t fail_connect;   /**< failures: resolve, connect, send, receive */
    uint64_t fail_timeout;   /**< failures: timeout */
    uint64_t fail_tls;       /**< failures: TLS */
    uint64_t fail_rate_limited;       /**< failures: HTTP 429, or /ingest's 422 for a rate or
                                           ingestion limit (`resource_exhausted`) */
    uint64_t fail_server;             /**< failures: HTTP 5xx */
    uint64_t fail_rejected;           /**< failures: other 4xx (a 422 that is a validation
                                           error), redirects; /ingest's 422 for an ingester
                                           error counts in fail_server */
    uint64_t fail_other;              /**< failures: anything else */
    uint64_t dropped_queue_full;      /**< oldest profile dropped: queue full and no spool */
    uint64_t dropped_rejected;        /**< dropped: the server rejected it (not retryable) */
    uint64_t dropped_retry_exhausted; /**< dropped: retry budget spent and no spool */
    uint64_t dropped_stop_deadline;   /**< dropped: flush deadline passed at stop and no spool */
    uint64_t dropped_spool_io;        /**< dropped: writing it to the spool failed */
    uint64_t spooled;                 /**< queued profiles written to the spool */
    uint64_t spool_resent;            /**< spool files the server accepted (then deleted) */
    uint64_t spool_rejected;          /**< spool files the server rejected (deleted) */
    uint64_t spool_evicted;           /**< spool files deleted to stay under max_bytes */
    uint64_t spool_expired;           /**< spool files deleted for being older than max_age */
    uint64_t spool_corrupt;           /**< unreadable spool files deleted */
    uint64_t spool_files;             /**< files in the spool now */
    uint64_t spool_bytes;             /**< bytes in the spool now */
    uint64_t
        queue_depth; /**< profiles queued now, including one in flight (at most capacity + 1) */
    uint64_t queue_high_water; /**< largest queue_depth seen */
    uint64_t queue_capacity;   /**< the configured capacity */
    uint64_t parts_split;      /**< profiles queued beyond one per report because a report was
                                    split to fit the server's limits (counted in reports_queued) */
    uint64_t spool_foreign;    /**< spool files kept, not sent: spooled for another server, tenant
                                    or credentials than this agent's */
} mp_pyro_stats;

/** A running uploader (opaque). */
typedef struct mp_pyro_agent mp_pyro_agent;

/**
 * Validates `cfg` (copied; the caller keeps it), opens the spool, starts
 * `backend` and the two threads. `backend` is borrowed: it must outlive
 * the agent and serve one agent at a time.
 *
 * With `backend` NULL the agent is a *sink*: no reporter thread, no
 * schedule; profiles produced elsewhere arrive through
 * mp_pyro_agent_submit() (what the LD_PRELOAD runtime does, whose own
 * reporter thread already takes the reports), and everything else
 * (queue, retries, spool, stop flush, counters) is the same. Its
 * `spyName` is "mimprof".
 * @return MP_PYRO_OK and `*out`; a configuration status; MP_PYRO_E_STATE
 *         when `backend` is in use; MP_PYRO_E_SPOOL_LOCKED / MP_PYRO_E_IO;
 *         the backend's start() status.
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_start(const mp_pyro_config *cfg, mp_pyro_backend *backend,
                                               mp_pyro_agent **out);

/**
 * Everything a launcher or LD_PRELOAD object needs in one call: a config
 * from mp_pyro_config_from_env(), then mp_pyro_agent_start() (`backend`
 * may be NULL: a sink, see there).
 * @return MP_PYRO_E_NOT_CONFIGURED when PYROSCOPE_SERVER_ADDRESS or
 *         PYROSCOPE_APPLICATION_NAME is unset (nothing is started).
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_start_from_env(mp_pyro_backend *backend,
                                                        mp_pyro_agent **out);

/**
 * Takes the final report (from the last boundary to now), stops the
 * backend and delivers the queue until the flush deadline; what is left
 * then goes to the spool or is counted in `dropped_stop_deadline`.
 * Idempotent.
 * @return MP_PYRO_OK when the queue was emptied; MP_PYRO_E_DEADLINE when
 *         profiles were spooled or dropped at the deadline.
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_stop(mp_pyro_agent *a);

/**
 * Queues one uncompressed pprof produced by the caller (a sink agent, or
 * extra profiles next to a backend's): fitted to the server's limits
 * (mp_pyro_server_limits: `__delta__` sample labels removed, one sample
 * per stack, split when beyond the limits) and gzipped here, then
 * uploaded like the agent's own, with `from_nanos`/`until_nanos` as its
 * window. Any thread; never blocks on the network. An empty profile
 * (`len` 0) is counted in `reports_empty` and not sent.
 * @return MP_PYRO_OK; MP_PYRO_E_STATE once mp_pyro_agent_stop() was called;
 *         MP_PYRO_E_INVALID_ARGUMENT (also when `pprof` is not a pprof
 *         Profile; counted in `reports_failed`); MP_PYRO_E_NOMEM.
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_submit(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                                int64_t from_nanos, int64_t until_nanos);

/** The prefix of the peak profile's sample types on the server (see
 *  mp_pyro_agent_submit_as()). */
#define MP_PYRO_PEAK_PREFIX "peak_"

/**
 * Like mp_pyro_agent_submit(), for a profile of another kind than the
 * reports: every sample type T is uploaded as `type_prefix`T, so that it
 * is its own profile type on the server. With MP_PYRO_PEAK_PREFIX, the
 * window's peak of mp_profiler_report_peak() (sample types inuse_objects,
 * inuse_space) becomes `memory:peak_inuse_objects:count:space:bytes` and
 * `memory:peak_inuse_space:bytes:space:bytes` in the same series (service
 * name and tags) as the reports, and Grafana shows the flame graph of
 * each window's peak next to the live heap. Counted like any submitted
 * profile.
 * @return as mp_pyro_agent_submit(); MP_PYRO_E_INVALID_ARGUMENT also when
 *         `type_prefix` is not 1..32 of [a-z0-9_].
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_submit_as(mp_pyro_agent *a, const uint8_t *pprof,
                                                   size_t len, int64_t from_nanos,
                                                   int64_t until_nanos, const char *type_prefix);

/** Stops `a` if running and frees it. NULL is a no-op. */
MP_PYRO_API void mp_pyro_agent_free(mp_pyro_agent *a);

/** Copies the counters into `out`. */
MP_PYRO_API void mp_pyro_agent_stats(const mp_pyro_agent *a, mp_pyro_stats *out);

/**
 * Copies the last upload or report error sentence (with the server's
 * message for HTTP errors) into `buf` (NUL-terminated, truncated to
 * `len`). @return its status, MP_PYRO_OK when there was none.
 */
MP_PYRO_API mp_pyro_status mp_pyro_agent_last_error(const mp_pyro_agent *a, char *buf, size_t len);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name One-shot upload                                             */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * Sends one uncompressed pprof synchronously with `cfg` (one attempt, no
 * retry, no queue): what the agent does for one profile, fitted to the
 * server's limits as mp_pyro_agent_submit() says. A report split in
 * several requests is sent in order up to the first failure (the parts
 * sent before it are stored: resending the whole report would count them
 * twice).
 * @param cfg the configuration (validated here; the sentence of a
 *        configuration error goes to `err`).
 * @param pprof,len the profile, uncompressed (gzipped here).
 * @param from_nanos,until_nanos the window (`from`/`until` of /ingest).
 * @param spy_name `spyName` (NULL = "mimprof").
 * @param err,err_len NULL or a buffer for the sentence (server message
 *        included) and its size.
 * @return MP_PYRO_OK on 2xx, else the classified failure;
 *         MP_PYRO_E_INVALID_ARGUMENT when `pprof` is not a pprof Profile.
 */
MP_PYRO_API mp_pyro_status mp_pyro_upload(mp_pyro_config *cfg, const uint8_t *pprof, size_t len,
                                          int64_t from_nanos, int64_t until_nanos,
                                          const char *spy_name, char *err, size_t err_len);

/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_PYROSCOPE_H */
