// SPDX-License-Identifier: MIT
//! The exclusive Profiler session over the C library's process recorder.

use core::ffi::CStr;
use core::ptr::{self, NonNull};
use std::ffi::CString;

use mimprof_sys as sys;

use crate::alloc::unsampled;
use crate::error::{check, Error};

/// How reports name stack frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Symbolize {
    /// Addresses and mappings only (server-side symbolization).
    None,
    /// Function names from the ELF symbol tables (the default).
    Functions,
    /// Function names, file:line and inlined frames (DWARF; the C library
    /// must be built with libdw, else [`Profiler::start`] answers
    /// [`Error::Unsupported`]).
    Lines,
}

/// Which frames reports drop from the leaf end of their stacks, so that
/// the allocation site, not the allocator's entry point, is the leaf
/// (`mp_prof_set_drop_frames`, applied by [`Profiler::start`] to every
/// report of the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DropFrames {
    /// The allocator's entry points ([`drop_frames_default`]): `malloc`
    /// and its family, C++'s `operator new` and the standard libraries'
    /// allocator wrappers, Rust's `__rust_alloc`, `alloc::alloc::*`,
    /// `alloc::raw_vec::*` (a growing `Vec` is its caller's), `Box::new`
    /// and `Vec::with_capacity`. The default.
    #[default]
    Allocator,
    /// Those and the frames a POSIX extended regular expression matches
    /// (whole function names, as pprof matches `drop_frames`): your own
    /// wrappers, `"my_crate::arena::.*"`. One that is not a regular
    /// expression makes [`Profiler::start`] answer [`Error::InvalidConfig`].
    AllocatorAnd(&'static str),
    /// No frame is dropped: `malloc` or `operator new` stay the leaves.
    Nothing,
}

/// The pattern of [`DropFrames::Allocator`], as reports name it in their
/// `drop_frames`.
pub fn drop_frames_default() -> &'static str {
    // SAFETY: a static NUL-terminated string of the library.
    unsafe { CStr::from_ptr(sys::mp_prof_drop_frames_default()) }
        .to_str()
        .unwrap_or("")
}

/// A session's configuration. [`Config::default`] holds the C library's
/// defaults (512 KiB mean interval, 64 frames); [`Profiler::start`]
/// validates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Mean bytes between samples (default 512 KiB), at least 1.
    pub sample_interval_bytes: usize,
    /// Frames kept per stack (default 64), 1..=512.
    pub max_stack_depth: u32,
    /// Records per thread ring (default 256).
    pub ring_capacity: usize,
    /// Bound on the live table (default 1 << 20).
    pub max_live_samples: usize,
    /// 0: random; a fixed seed makes each thread's sampling deterministic.
    pub seed: u64,
    /// How reports name frames (default [`Symbolize::Functions`]).
    pub symbolize: Symbolize,
    /// Distinct stacks the global overflow shards hold (default 65536).
    pub overflow_stacks: usize,
    /// Records one report drains at most (default 1 << 24).
    pub report_max_records: usize,
    /// Frames dropped from the leaf end of stacks (default
    /// [`DropFrames::Allocator`]).
    pub drop_frames: DropFrames,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = core::mem::MaybeUninit::<sys::mp_prof_config>::uninit();
        // SAFETY: mp_prof_config_init fills every field.
        let c = unsafe {
            sys::mp_prof_config_init(c.as_mut_ptr());
            c.assume_init()
        };
        Config {
            sample_interval_bytes: c.sample_interval_bytes,
            max_stack_depth: c.max_stack_depth,
            ring_capacity: c.ring_capacity,
            max_live_samples: c.max_live_samples,
            seed: c.seed,
            symbolize: match c.symbolize {
                sys::MP_PROF_SYMBOLIZE_NONE => Symbolize::None,
                sys::MP_PROF_SYMBOLIZE_LINES => Symbolize::Lines,
                _ => Symbolize::Functions,
            },
            overflow_stacks: c.overflow_stacks,
            report_max_records: c.report_max_records,
            drop_frames: DropFrames::Allocator,
        }
    }
}

impl Config {
    /// The C configuration.
    pub fn to_raw(&self) -> sys::mp_prof_config {
        sys::mp_prof_config {
            sample_interval_bytes: self.sample_interval_bytes,
            max_stack_depth: self.max_stack_depth,
            ring_capacity: self.ring_capacity,
            max_live_samples: self.max_live_samples,
            seed: self.seed,
            symbolize: match self.symbolize {
                Symbolize::None => sys::MP_PROF_SYMBOLIZE_NONE,
                Symbolize::Functions => sys::MP_PROF_SYMBOLIZE_FUNCTIONS,
                Symbolize::Lines => sys::MP_PROF_SYMBOLIZE_LINES,
            },
            overflow_stacks: self.overflow_stacks,
            report_max_records: self.report_max_records,
        }
    }
}

/// The process recorder's counters (`mp_prof_stats`, documented in
/// `<mimprof/profiling.h>`).
pub type Stats = sys::mp_prof_stats;

/// The recorder's counters now.
pub fn diagnostics() -> Stats {
    let mut s = Stats::default();
    // SAFETY: fills `s`.
    unsafe { sys::mp_prof_diagnostics(&mut s) };
    s
}

/// The version of the linked `libmimprof-profiling`.
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::mp_prof_version()) }
        .to_str()
        .unwrap_or("?")
}

/// An exclusive profiling session: owns the one process recorder from
/// [`Profiler::start`] to [`Profiler::stop`] or drop.
///
/// Once stopped, an owner answers [`Error::Inactive`] and can no longer
/// affect the recorder: a later session started by anyone is safe from it.
#[derive(Debug)]
pub struct Profiler {
    raw: NonNull<sys::mp_profiler>,
}

// SAFETY: every function of the C session may be called from any thread.
unsafe impl Send for Profiler {}
// SAFETY: as above; the C library serializes reports and stops.
unsafe impl Sync for Profiler {}

impl Profiler {
    /// Validates `config`, checks that a [`SamplingAllocator`](crate::SamplingAllocator)
    /// has served an allocation in this process ([`Error::AllocatorNotObserved`]
    /// otherwise: the program's global allocator is not one), and claims the
    /// process recorder ([`Error::Busy`] while another session owns it).
    pub fn start(config: &Config) -> Result<Profiler, Error> {
        let raw_cfg = config.to_raw();
        let (extra, mode) = match config.drop_frames {
            DropFrames::Allocator => (None, sys::MP_PROF_DROP_ALLOCATOR),
            DropFrames::AllocatorAnd(re) => (Some(re), sys::MP_PROF_DROP_ALLOCATOR),
            DropFrames::Nothing => (None, sys::MP_PROF_DROP_NOTHING),
        };
        let extra = match extra {
            Some(re) => Some(CString::new(re).map_err(|_| Error::InvalidConfig)?),
            None => None,
        };
        let extra_ptr = extra.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        // SAFETY: a NUL-terminated string or NULL.
        check(unsafe { sys::mp_prof_set_drop_frames(extra_ptr, mode) })?;
        let mut p = ptr::null_mut();
        // SAFETY: valid config and out pointer.
        check(unsafe { sys::mp_profiler_start(&raw_cfg, &mut p) })?;
        NonNull::new(p)
            .map(|raw| Profiler { raw })
            .ok_or(Error::Internal)
    }

    /// One uncompressed pprof: the allocations since the previous report
    /// (`alloc_objects`/`alloc_space`, samples labelled
    /// `__delta__="false"`) and the live snapshot
    /// (`inuse_objects`/`inuse_space`), already unbiased.
    /// [`Error::Inactive`] once stopped.
    pub fn report(&self) -> Result<Vec<u8>, Error> {
        let mut buf = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: valid handle and out pointers.
        check(unsafe { sys::mp_profiler_report(self.raw.as_ptr(), &mut buf, &mut len) })?;
        let out = unsampled(|| {
            if buf.is_null() {
                Vec::new()
            } else {
                // SAFETY: the library returned `len` bytes at `buf`.
                unsafe { core::slice::from_raw_parts(buf, len) }.to_vec()
            }
        });
        // SAFETY: the buffer of this report, freed once.
        unsafe { sys::mp_prof_buffer_free(buf) };
        Ok(out)
    }

    /// Adds `comment` to the next report's comments (`go tool pprof
    /// -comments`); at most 1024 bytes, without NUL.
    pub fn annotate(&self, comment: &str) -> Result<(), Error> {
        let c = CString::new(comment).map_err(|_| Error::InvalidConfig)?;
        // SAFETY: valid handle and string.
        check(unsafe { sys::mp_profiler_annotate(self.raw.as_ptr(), c.as_ptr()) })
    }

    /// Ends the session: releases the process recorder and the pending
    /// records. Idempotent; afterwards [`Profiler::report`] answers
    /// [`Error::Inactive`].
    pub fn stop(&self) -> Result<(), Error> {
        // SAFETY: valid handle.
        check(unsafe { sys::mp_profiler_stop(self.raw.as_ptr()) })
    }

    /// The C handle, for the adapters built on this crate.
    pub fn as_raw(&self) -> *mut sys::mp_profiler {
        self.raw.as_ptr()
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        // SAFETY: stops the session if running and frees the handle, once.
        unsafe { sys::mp_profiler_free(self.raw.as_ptr()) }
    }
}
