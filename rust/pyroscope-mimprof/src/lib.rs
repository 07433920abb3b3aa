// SPDX-License-Identifier: MIT
//! A mimprof heap-profiling backend for the [`pyroscope`] crate's agent.
//!
//! pyroscope-rs users keep their agent (its schedule, HTTP client, auth,
//! tenant and labels); this crate gives it mimprof's reports, the way its
//! `backend-jemalloc` feature gives it `jemalloc_pprof`'s: each report is
//! one uncompressed pprof from [`mimprof::Profiler::report`], passed
//! through untouched as [`ReportData::RawPprof`] (the agent gzips and pushes
//! it). The profiler yields encoded profiles; the uploader is the agent's.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use pyroscope::pyroscope::PyroscopeAgentBuilder;
//! use pyroscope_mimprof::mimprof_backend;
//!
//! #[global_allocator]
//! static A: mimprof::MiMalloc = mimprof::MIMALLOC; // feature "mimalloc" of mimprof
//!
//! let agent = PyroscopeAgentBuilder::new(
//!     "http://localhost:4040", "my-app", 100, "pyroscope-rs", env!("CARGO_PKG_VERSION"),
//!     mimprof_backend(mimprof::Config::default()),
//! )
//! .build()?;
//! let running = agent.start()?;
//! // ...
//! running.stop()?.shutdown();
//! # Ok(()) }
//! ```
//!
//! Each profile holds the allocations of the window (`alloc_objects`,
//! `alloc_space`) and the live heap (`inuse_objects`, `inuse_space`),
//! already unbiased by mimprof's estimator. The program's global allocator
//! must be a [`mimprof::SamplingAllocator`]; otherwise the agent's start
//! fails with mimprof's "missing allocator" error.
#![warn(missing_docs)]

use mimprof::{Config, Profiler};
use pyroscope::backend::{
    Backend, BackendImpl, BackendUninitialized, ReportBatch, ReportData, ThreadTag,
};
use pyroscope::error::{PyroscopeError, Result};

/// The profile type the reports are pushed as (`__name__="memory"`), as
/// pyroscope-rs's jemalloc backend does.
pub const PROFILE_TYPE: &str = "memory";

/// The backend for [`pyroscope::pyroscope::PyroscopeAgentBuilder::new`]:
/// starts a mimprof session with `config` when the agent is built and
/// stops it at shutdown.
pub fn mimprof_backend(config: Config) -> BackendImpl<BackendUninitialized> {
    BackendImpl::new(Box::new(MimprofBackend::new(config)))
}

/// The mimprof backend (see [`mimprof_backend`]).
#[derive(Debug)]
pub struct MimprofBackend {
    config: Config,
    profiler: Option<Profiler>,
    reporter_excluded: bool,
}

impl MimprofBackend {
    /// A backend that will start a session with `config`.
    pub fn new(config: Config) -> MimprofBackend {
        MimprofBackend {
            config,
            profiler: None,
            reporter_excluded: false,
        }
    }
}

fn error(what: &str, e: mimprof::Error) -> PyroscopeError {
    PyroscopeError::new(&format!("mimprof: {what}: {e}"))
}

impl Backend for MimprofBackend {
    fn initialize(&mut self) -> Result<()> {
        let p = Profiler::start(&self.config).map_err(|e| error("start", e))?;
        self.profiler = Some(p);
        Ok(())
    }

    fn shutdown(self: Box<Self>) -> Result<()> {
        if let Some(p) = self.profiler {
            p.stop().map_err(|e| error("stop", e))?;
        }
        Ok(())
    }

    fn report(&mut self) -> Result<ReportBatch> {
        // The agent's reporting thread is profiler machinery: what it
        // allocates for uploads must not appear in the next report.
        if !self.reporter_excluded {
            mimprof::exclude_current_thread();
            self.reporter_excluded = true;
        }
        let p = self
            .profiler
            .as_ref()
            .ok_or_else(|| PyroscopeError::new("mimprof: report before initialize"))?;
        let pprof = p.report().map_err(|e| error("report", e))?;
        Ok(ReportBatch {
            profile_type: PROFILE_TYPE.into(),
            data: ReportData::RawPprof(pprof),
        })
    }

    /// Thread tags label CPU samples by thread; heap samples are taken in
    /// the allocator, which has no per-thread tags: accepted and ignored,
    /// as the jemalloc backend does.
    fn add_tag(&self, _tag: ThreadTag) -> Result<()> {
        Ok(())
    }

    /// See [`MimprofBackend::add_tag`].
    fn remove_tag(&self, _tag: ThreadTag) -> Result<()> {
        Ok(())
    }
}
