// SPDX-License-Identifier: MIT
//! `<mimprof/pyroscope.h>`: the Pyroscope upload agent (libmimprof-pyroscope).

use core::ffi::{c_char, c_int};

use crate::mp_prof_config;

/// `mp_pyro_status`: the status of a mimprof-pyroscope call (`MP_PYRO_*`).
pub type mp_pyro_status = c_int;
/// Success.
pub const MP_PYRO_OK: mp_pyro_status = 0;
/// A NULL or out-of-range argument.
pub const MP_PYRO_E_INVALID_ARGUMENT: mp_pyro_status = 1;
/// No server address or application name was given.
pub const MP_PYRO_E_NOT_CONFIGURED: mp_pyro_status = 7;
/// Stop: profiles were left undelivered at the flush deadline.
pub const MP_PYRO_E_DEADLINE: mp_pyro_status = 20;

/// `mp_pyro_protocol`: the ingestion endpoint.
pub type mp_pyro_protocol = c_int;
/// `POST /ingest` (multipart).
pub const MP_PYRO_PROTOCOL_INGEST: mp_pyro_protocol = 0;
/// `POST /push.v1.PusherService/Push` (Connect).
pub const MP_PYRO_PROTOCOL_PUSH: mp_pyro_protocol = 1;

/// `mp_pyro_config`: upload configuration (opaque).
#[repr(C)]
pub struct mp_pyro_config {
    _private: [u8; 0],
}

/// `mp_pyro_backend`: a profile source (opaque).
#[repr(C)]
pub struct mp_pyro_backend {
    _private: [u8; 0],
}

/// `mp_pyro_agent`: a running uploader (opaque).
#[repr(C)]
pub struct mp_pyro_agent {
    _private: [u8; 0],
}

/// `mp_pyro_stats`: counters of an agent.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mp_pyro_stats {
    /// Backend reports taken, plus submitted profiles.
    pub reports: u64,
    /// Reports with nothing to upload.
    pub reports_empty: u64,
    /// Backend report errors.
    pub reports_failed: u64,
    /// Profiles put in the queue.
    pub reports_queued: u64,
    /// Queued profiles the server accepted.
    pub uploaded: u64,
    /// HTTP requests made.
    pub requests: u64,
    /// Requests that were a retry.
    pub retries: u64,
    /// Request body bytes of accepted requests.
    pub bytes_sent: u64,
    /// Failures: resolve, connect, send, receive.
    pub fail_connect: u64,
    /// Failures: timeout.
    pub fail_timeout: u64,
    /// Failures: TLS.
    pub fail_tls: u64,
    /// Failures: rate limited.
    pub fail_rate_limited: u64,
    /// Failures: HTTP 5xx.
    pub fail_server: u64,
    /// Failures: other 4xx, redirects.
    pub fail_rejected: u64,
    /// Failures: anything else.
    pub fail_other: u64,
    /// Dropped: queue full and no spool.
    pub dropped_queue_full: u64,
    /// Dropped: the server rejected it.
    pub dropped_rejected: u64,
    /// Dropped: retry budget spent and no spool.
    pub dropped_retry_exhausted: u64,
    /// Dropped: flush deadline passed at stop and no spool.
    pub dropped_stop_deadline: u64,
    /// Dropped: writing it to the spool failed.
    pub dropped_spool_io: u64,
    /// Queued profiles written to the spool.
    pub spooled: u64,
    /// Spool files the server accepted.
    pub spool_resent: u64,
    /// Spool files the server rejected.
    pub spool_rejected: u64,
    /// Spool files deleted to stay under max_bytes.
    pub spool_evicted: u64,
    /// Spool files deleted for being older than max_age.
    pub spool_expired: u64,
    /// Unreadable spool files deleted.
    pub spool_corrupt: u64,
    /// Files in the spool now.
    pub spool_files: u64,
    /// Bytes in the spool now.
    pub spool_bytes: u64,
    /// Profiles queued now.
    pub queue_depth: u64,
    /// Largest queue_depth seen.
    pub queue_high_water: u64,
    /// The configured capacity.
    pub queue_capacity: u64,
    /// Profiles queued beyond one per report because a report was split.
    pub parts_split: u64,
    /// Spool files kept for another server, tenant or credentials.
    pub spool_foreign: u64,
}

extern "C" {
    /// A sentence for a status; never NULL.
    pub fn mp_pyro_strerror(s: mp_pyro_status) -> *const c_char;
    /// The adapter package's version.
    pub fn mp_pyro_version() -> *const c_char;
    /// A configuration with the defaults.
    pub fn mp_pyro_config_new(out: *mut *mut mp_pyro_config) -> mp_pyro_status;
    /// Releases a configuration.
    pub fn mp_pyro_config_free(cfg: *mut mp_pyro_config);
    /// The sentence of the last configuration error ("" when none).
    pub fn mp_pyro_config_error(cfg: *const mp_pyro_config) -> *const c_char;
    /// Server base URL.
    pub fn mp_pyro_config_set_server(
        cfg: *mut mp_pyro_config,
        url: *const c_char,
    ) -> mp_pyro_status;
    /// Application (service) name.
    pub fn mp_pyro_config_set_app_name(
        cfg: *mut mp_pyro_config,
        name: *const c_char,
    ) -> mp_pyro_status;
    /// Adds a static tag.
    pub fn mp_pyro_config_add_tag(
        cfg: *mut mp_pyro_config,
        name: *const c_char,
        value: *const c_char,
    ) -> mp_pyro_status;
    /// HTTP Basic auth (NULL user clears it).
    pub fn mp_pyro_config_set_basic_auth(
        cfg: *mut mp_pyro_config,
        user: *const c_char,
        password: *const c_char,
    ) -> mp_pyro_status;
    /// Bearer token (NULL clears it).
    pub fn mp_pyro_config_set_bearer_token(
        cfg: *mut mp_pyro_config,
        token: *const c_char,
    ) -> mp_pyro_status;
    /// Tenant id (`X-Scope-OrgID`; NULL clears it).
    pub fn mp_pyro_config_set_tenant(
        cfg: *mut mp_pyro_config,
        tenant: *const c_char,
    ) -> mp_pyro_status;
    /// The ingestion endpoint.
    pub fn mp_pyro_config_set_protocol(
        cfg: *mut mp_pyro_config,
        protocol: mp_pyro_protocol,
    ) -> mp_pyro_status;
    /// Report period in milliseconds.
    pub fn mp_pyro_config_set_upload_interval_ms(
        cfg: *mut mp_pyro_config,
        ms: u32,
    ) -> mp_pyro_status;
    /// Reads the PYROSCOPE_* environment variables into `cfg`.
    pub fn mp_pyro_config_from_env(cfg: *mut mp_pyro_config) -> mp_pyro_status;
    /// The mimprof profiler as a backend that owns its session.
    pub fn mp_pyro_backend_mimprof_new(
        cfg: *const mp_prof_config,
        out: *mut *mut mp_pyro_backend,
    ) -> mp_pyro_status;
    /// Destroys a backend not in use by an agent.
    pub fn mp_pyro_backend_free(b: *mut mp_pyro_backend);
    /// A sentence on the backend's last failure ("" when none).
    pub fn mp_pyro_backend_error(b: *const mp_pyro_backend) -> *const c_char;
    /// Starts an agent over `backend` (borrowed).
    pub fn mp_pyro_agent_start(
        cfg: *const mp_pyro_config,
        backend: *mut mp_pyro_backend,
        out: *mut *mut mp_pyro_agent,
    ) -> mp_pyro_status;
    /// Final report, stop, flush (idempotent).
    pub fn mp_pyro_agent_stop(a: *mut mp_pyro_agent) -> mp_pyro_status;
    /// Stops the agent if running and frees it.
    pub fn mp_pyro_agent_free(a: *mut mp_pyro_agent);
    /// Copies the agent's counters.
    pub fn mp_pyro_agent_stats(a: *const mp_pyro_agent, out: *mut mp_pyro_stats);
    /// The last upload or report error sentence.
    pub fn mp_pyro_agent_last_error(
        a: *const mp_pyro_agent,
        buf: *mut c_char,
        len: usize,
    ) -> mp_pyro_status;
}
