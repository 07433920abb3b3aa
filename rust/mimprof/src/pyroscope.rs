// SPDX-License-Identifier: MIT
//! Uploads to Grafana Pyroscope through the C adapter's agent
//! (`libmimprof-pyroscope`, feature `pyroscope`): the agent owns a
//! [`Profiler`](crate::Profiler)-equivalent session, takes a report every
//! upload interval on its own thread and sends it (retries, bounded queue,
//! auth, tenant and tags are the C agent's). Nothing of Pyroscope is
//! compiled without the feature.
//!
//! ```no_run
//! # fn main() -> Result<(), mimprof::pyroscope::AgentError> {
//! let agent = mimprof::pyroscope::AgentConfig::new("http://localhost:4040", "my-service")
//!     .tag("env", "prod")
//!     .start()?;
//! // ... the program runs; on drop (or agent.stop()) the last report is sent.
//! # Ok(()) }
//! ```

use core::ffi::{c_char, CStr};
use core::fmt;
use core::ptr::{self, NonNull};
use std::ffi::CString;
use std::time::Duration;

use mimprof_sys as sys;

use crate::profiler::Config;

/// A failure of the agent: the C status (`mp_pyro_status`) and the
/// adapter's sentence (`mp_pyro_strerror`, with the configuration's or the
/// backend's detail when it gave one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    status: i32,
    detail: String,
}

impl AgentError {
    /// The C status code (`MP_PYRO_E_*`).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The detail sentence the adapter gave ("" when none).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    fn new(status: i32, detail: *const c_char) -> AgentError {
        let detail = if detail.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated sentence of the adapter.
            unsafe { CStr::from_ptr(detail) }
                .to_string_lossy()
                .into_owned()
        };
        AgentError { status, detail }
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: never NULL, static.
        let s = unsafe { CStr::from_ptr(sys::mp_pyro_strerror(self.status)) };
        f.write_str(&s.to_string_lossy())?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for AgentError {}

/// The agent's configuration: server, application name, tags, auth and
/// tenant (Pyroscope's rules are checked by the adapter when set and at
/// start), and the profiler's own [`Config`].
#[derive(Debug, Clone)]
pub struct AgentConfig {
    server: String,
    app_name: String,
    tags: Vec<(String, String)>,
    basic_auth: Option<(String, String)>,
    bearer_token: Option<String>,
    tenant: Option<String>,
    upload_interval: Option<Duration>,
    push: bool,
    from_env: bool,
    profiler: Config,
}

impl AgentConfig {
    /// `server` (an absolute http(s) URL, e.g. `http://localhost:4040`)
    /// and the application (service) name.
    pub fn new(server: &str, app_name: &str) -> AgentConfig {
        AgentConfig {
            server: server.to_owned(),
            app_name: app_name.to_owned(),
            tags: Vec::new(),
            basic_auth: None,
            bearer_token: None,
            tenant: None,
            upload_interval: None,
            push: false,
            from_env: false,
            profiler: Config::default(),
        }
    }

    /// Everything from the `PYROSCOPE_*` environment variables the official
    /// clients read (server address, application name, tags, auth, tenant);
    /// the setters below then override.
    pub fn from_env() -> AgentConfig {
        AgentConfig {
            from_env: true,
            ..AgentConfig::new("", "")
        }
    }

    /// Adds a static tag (series label) `name=value`.
    pub fn tag(mut self, name: &str, value: &str) -> AgentConfig {
        self.tags.push((name.to_owned(), value.to_owned()));
        self
    }

    /// HTTP Basic auth (Grafana Cloud: user = stack id, password = token).
    pub fn basic_auth(mut self, user: &str, password: &str) -> AgentConfig {
        self.basic_auth = Some((user.to_owned(), password.to_owned()));
        self
    }

    /// A bearer token (`Authorization: Bearer <token>`).
    pub fn bearer_token(mut self, token: &str) -> AgentConfig {
        self.bearer_token = Some(token.to_owned());
        self
    }

    /// The tenant (`X-Scope-OrgID`) of a multi-tenant server.
    pub fn tenant(mut self, tenant: &str) -> AgentConfig {
        self.tenant = Some(tenant.to_owned());
        self
    }

    /// The report period (default 10 s; 10 ms ..= 30 min).
    pub fn upload_interval(mut self, every: Duration) -> AgentConfig {
        self.upload_interval = Some(every);
        self
    }

    /// Use the Connect `Push` endpoint instead of `/ingest`.
    pub fn push_protocol(mut self, push: bool) -> AgentConfig {
        self.push = push;
        self
    }

    /// The profiler session's configuration (default [`Config::default`]).
    pub fn profiler(mut self, config: Config) -> AgentConfig {
        self.profiler = config;
        self
    }

    /// Starts the profiler session and the agent's threads.
    pub fn start(&self) -> Result<Agent, AgentError> {
        Agent::start(self)
    }
}

fn cstring(s: &str) -> Result<CString, AgentError> {
    CString::new(s).map_err(|_| AgentError {
        status: sys::MP_PYRO_E_INVALID_ARGUMENT,
        detail: format!("{s:?} holds a NUL byte"),
    })
}

/// An owned `mp_pyro_config`.
struct RawConfig(NonNull<sys::mp_pyro_config>);

impl RawConfig {
    fn check(&self, status: i32) -> Result<(), AgentError> {
        if status == sys::MP_PYRO_OK {
            return Ok(());
        }
        // SAFETY: valid config.
        Err(AgentError::new(status, unsafe {
            sys::mp_pyro_config_error(self.0.as_ptr())
        }))
    }

    fn build(c: &AgentConfig) -> Result<RawConfig, AgentError> {
        let mut raw = ptr::null_mut();
        // SAFETY: out pointer.
        let st = unsafe { sys::mp_pyro_config_new(&mut raw) };
        let cfg = match NonNull::new(raw) {
            Some(p) if st == sys::MP_PYRO_OK => RawConfig(p),
            _ => return Err(AgentError::new(st, ptr::null())),
        };
        let p = cfg.0.as_ptr();
        // SAFETY (every call below): a valid config and NUL-terminated strings.
        unsafe {
            if c.from_env {
                cfg.check(sys::mp_pyro_config_from_env(p))?;
            }
            if !c.server.is_empty() {
                cfg.check(sys::mp_pyro_config_set_server(
                    p,
                    cstring(&c.server)?.as_ptr(),
                ))?;
            }
            if !c.app_name.is_empty() {
                let name = cstring(&c.app_name)?;
                cfg.check(sys::mp_pyro_config_set_app_name(p, name.as_ptr()))?;
            }
            for (k, v) in &c.tags {
                let (k, v) = (cstring(k)?, cstring(v)?);
                cfg.check(sys::mp_pyro_config_add_tag(p, k.as_ptr(), v.as_ptr()))?;
            }
            if let Some((u, pw)) = &c.basic_auth {
                let (u, pw) = (cstring(u)?, cstring(pw)?);
                cfg.check(sys::mp_pyro_config_set_basic_auth(
                    p,
                    u.as_ptr(),
                    pw.as_ptr(),
                ))?;
            }
            if let Some(t) = &c.bearer_token {
                cfg.check(sys::mp_pyro_config_set_bearer_token(
                    p,
                    cstring(t)?.as_ptr(),
                ))?;
            }
            if let Some(t) = &c.tenant {
                cfg.check(sys::mp_pyro_config_set_tenant(p, cstring(t)?.as_ptr()))?;
            }
            if let Some(d) = c.upload_interval {
                let ms = u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
                cfg.check(sys::mp_pyro_config_set_upload_interval_ms(p, ms))?;
            }
            if c.push {
                cfg.check(sys::mp_pyro_config_set_protocol(
                    p,
                    sys::MP_PYRO_PROTOCOL_PUSH,
                ))?;
            }
        }
        Ok(cfg)
    }
}

impl Drop for RawConfig {
    fn drop(&mut self) {
        // SAFETY: owned, freed once (secrets wiped by the adapter).
        unsafe { sys::mp_pyro_config_free(self.0.as_ptr()) }
    }
}

/// The agent's upload counters (`mp_pyro_stats`, documented in
/// `<mimprof/pyroscope.h>`).
pub type AgentStats = sys::mp_pyro_stats;

/// A running upload agent over its own profiler session. Dropping it (or
/// [`Agent::stop`]) takes the final report, delivers the queue within the
/// flush deadline and ends the session.
#[derive(Debug)]
pub struct Agent {
    agent: NonNull<sys::mp_pyro_agent>,
    backend: NonNull<sys::mp_pyro_backend>,
}

// SAFETY: the agent's functions may be called from any thread.
unsafe impl Send for Agent {}
// SAFETY: as above.
unsafe impl Sync for Agent {}

impl Agent {
    /// Starts the profiler session ([`crate::Error::AllocatorNotObserved`]
    /// comes back as a backend error naming it) and the agent.
    pub fn start(config: &AgentConfig) -> Result<Agent, AgentError> {
        let cfg = RawConfig::build(config)?;
        let prof = config.profiler.to_raw();
        let mut backend = ptr::null_mut();
        // SAFETY: valid config and out pointer.
        let st = unsafe { sys::mp_pyro_backend_mimprof_new(&prof, &mut backend) };
        let backend = match NonNull::new(backend) {
            Some(b) if st == sys::MP_PYRO_OK => b,
            _ => return Err(AgentError::new(st, ptr::null())),
        };
        let mut agent = ptr::null_mut();
        // SAFETY: valid config and backend; the backend outlives the agent
        // (both are freed together, the agent first).
        let st = unsafe { sys::mp_pyro_agent_start(cfg.0.as_ptr(), backend.as_ptr(), &mut agent) };
        match NonNull::new(agent) {
            Some(agent) if st == sys::MP_PYRO_OK => Ok(Agent { agent, backend }),
            _ => {
                // SAFETY: the sentence of the config or of the backend.
                let detail = unsafe {
                    let c = sys::mp_pyro_config_error(cfg.0.as_ptr());
                    if !c.is_null() && *c != 0 {
                        c
                    } else {
                        sys::mp_pyro_backend_error(backend.as_ptr())
                    }
                };
                let err = AgentError::new(st, detail);
                // SAFETY: not in use by any agent.
                unsafe { sys::mp_pyro_backend_free(backend.as_ptr()) };
                Err(err)
            }
        }
    }

    /// Takes the final report, stops the session and delivers the queue
    /// until the flush deadline. Idempotent. An error when profiles were
    /// left undelivered.
    pub fn stop(&self) -> Result<(), AgentError> {
        // SAFETY: valid agent.
        let st = unsafe { sys::mp_pyro_agent_stop(self.agent.as_ptr()) };
        if st == sys::MP_PYRO_OK {
            return Ok(());
        }
        let mut buf = [0 as c_char; 512];
        // SAFETY: valid agent, buffer and length.
        unsafe { sys::mp_pyro_agent_last_error(self.agent.as_ptr(), buf.as_mut_ptr(), buf.len()) };
        Err(AgentError::new(st, buf.as_ptr()))
    }

    /// The upload counters now.
    pub fn stats(&self) -> AgentStats {
        let mut s = AgentStats::default();
        // SAFETY: valid agent and out pointer.
        unsafe { sys::mp_pyro_agent_stats(self.agent.as_ptr(), &mut s) };
        s
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // SAFETY: the agent first (it stops the backend), then the backend.
        unsafe {
            sys::mp_pyro_agent_free(self.agent.as_ptr());
            sys::mp_pyro_backend_free(self.backend.as_ptr());
        }
    }
}
