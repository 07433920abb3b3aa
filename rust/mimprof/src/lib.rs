// SPDX-License-Identifier: MIT
//! A sampling heap profiler for Rust programs, over the mimprof C libraries.
//!
//! Three lines:
//!
//! ```ignore
//! #[global_allocator]
//! static A: mimprof::MiMalloc = mimprof::MIMALLOC;      // feature "mimalloc"
//! let profiler = mimprof::Profiler::start(&mimprof::Config::default())?;
//! let pprof: Vec<u8> = profiler.report()?;              // uncompressed pprof
//! ```
//!
//! - [`SamplingAllocator<A>`] wraps any [`GlobalAlloc`](core::alloc::GlobalAlloc)
//!   provider, a statically dispatched field. An unsampled allocation
//!   costs one subtraction from a thread-local byte countdown and one
//!   branch; a sampled one (the countdown went below zero) enters the C
//!   library's recorder, which captures the stack and records the block
//!   with the weight of the unbiased estimator. There is one recorder and
//!   one pprof encoder in the process, in C.
//! - [`Profiler`] is the exclusive session: [`Profiler::start`],
//!   [`Profiler::report`] (owned uncompressed pprof bytes),
//!   [`Profiler::stop`] and `Drop`.
//! - Feature `pyroscope`: [`pyroscope::Agent`] uploads the reports to
//!   Grafana Pyroscope (the C adapter's agent). For the `pyroscope` crate's
//!   own agent, the `pyroscope-mimprof` crate is a backend.
//!
//! A program that only sets the allocator links `libmimprof-profiling`
//! (through `mimprof-sys`) and nothing else of the profiler's crates.
//!
//! The C libraries are found with pkg-config; see the `mimprof-sys` crate.
#![warn(missing_docs)]

mod alloc;
mod error;
mod profiler;
#[cfg(feature = "pyroscope")]
pub mod pyroscope;

pub use crate::alloc::{exclude_current_thread, SamplingAllocator};
pub use crate::error::Error;
pub use crate::profiler::{
    diagnostics, drop_frames_default, version, Config, DropFrames, Profiler, Stats, Symbolize,
};

/// The sampling allocator over `mimalloc` (the `mimalloc` crate's allocator,
/// linked statically by that crate): the design's convenience alias.
#[cfg(feature = "mimalloc")]
pub type MiMalloc = SamplingAllocator<mimalloc::MiMalloc>;

/// A ready [`MiMalloc`], for `#[global_allocator] static A: mimprof::MiMalloc = mimprof::MIMALLOC;`.
#[cfg(feature = "mimalloc")]
pub const MIMALLOC: MiMalloc = SamplingAllocator::new(mimalloc::MiMalloc);

/// The sampling allocator over jemalloc (`tikv-jemallocator`).
#[cfg(feature = "jemalloc")]
pub type Jemalloc = SamplingAllocator<tikv_jemallocator::Jemalloc>;

/// A ready [`Jemalloc`], for `#[global_allocator] static A: mimprof::Jemalloc = mimprof::JEMALLOC;`.
#[cfg(feature = "jemalloc")]
pub const JEMALLOC: Jemalloc = SamplingAllocator::new(tikv_jemallocator::Jemalloc);
