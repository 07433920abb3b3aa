// SPDX-License-Identifier: MIT
//! Raw FFI bindings to `libmimprof-profiling` (`<mimprof/profiling.h>`,
//! `<mimprof/sampling.h>`, `<mimprof/sampling_foreign.h>`) and, with the
//! `pyroscope` feature, to `libmimprof-pyroscope` (`<mimprof/pyroscope.h>`).
//!
//! The libraries are found with pkg-config (`mimprof-profiling`,
//! `mimprof-pyroscope`), at exactly this crate's version. Every item here
//! mirrors a declaration of those headers, which document it; the safe API
//! is the `mimprof` crate.
#![no_std]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::sync::atomic::{AtomicU64, AtomicU8};

/// `mp_prof_status`: the status of a profiling call (`MP_PROF_*`).
pub type mp_prof_status = c_int;
/// Success.
pub const MP_PROF_OK: mp_prof_status = 0;
/// A config field is out of range.
pub const MP_PROF_E_INVALID_CONFIG: mp_prof_status = 1;
/// No sampling allocator has served an allocation in this process.
pub const MP_PROF_E_ALLOCATOR_NOT_OBSERVED: mp_prof_status = 2;
/// Another live session owns the process recorder.
pub const MP_PROF_E_BUSY: mp_prof_status = 3;
/// The session was stopped.
pub const MP_PROF_E_INACTIVE: mp_prof_status = 4;
/// Out of memory.
pub const MP_PROF_E_NOMEM: mp_prof_status = 5;
/// An internal invariant failed (a bug).
pub const MP_PROF_E_INTERNAL: mp_prof_status = 6;
/// A file could not be read or written.
pub const MP_PROF_E_IO: mp_prof_status = 7;
/// Not available on this platform or build.
pub const MP_PROF_E_UNSUPPORTED: mp_prof_status = 8;
/// A heap image could not be read or was refused.
pub const MP_PROF_E_BAD_IMAGE: mp_prof_status = 9;
/// Not a linkage name the demangler reads.
pub const MP_PROF_E_NOT_MANGLED: mp_prof_status = 10;

/// `mp_prof_symbolize`: how reports name stack frames.
pub type mp_prof_symbolize = c_int;
/// Addresses and mappings only.
pub const MP_PROF_SYMBOLIZE_NONE: mp_prof_symbolize = 0;
/// Function names (ELF symbol tables).
pub const MP_PROF_SYMBOLIZE_FUNCTIONS: mp_prof_symbolize = 1;
/// Function names, file:line and inlined frames (DWARF).
pub const MP_PROF_SYMBOLIZE_LINES: mp_prof_symbolize = 2;

/// `mp_prof_config`: session configuration; start from `mp_prof_config_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mp_prof_config {
    /// Mean bytes between samples (default 512 KiB).
    pub sample_interval_bytes: usize,
    /// Frames per stack (default 64).
    pub max_stack_depth: c_uint,
    /// Records per thread ring (default 256).
    pub ring_capacity: usize,
    /// Bound on the live table (default 1 << 20).
    pub max_live_samples: usize,
    /// 0 = random; a fixed seed makes sampling deterministic per thread.
    pub seed: u64,
    /// How reports name frames.
    pub symbolize: mp_prof_symbolize,
    /// Distinct stacks the global overflow shards can hold.
    pub overflow_stacks: usize,
    /// Records one report drains at most.
    pub report_max_records: usize,
}

/// `mp_prof_stats`: counters of the process recorder.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mp_prof_stats {
    /// Sampling hits in a session.
    pub samples_taken: u64,
    /// Records consumed by reports.
    pub samples_reported: u64,
    /// Hits dropped: thread ring not registered.
    pub dropped_registration: u64,
    /// Hits dropped: thread-local storage gone.
    pub dropped_teardown: u64,
    /// Hits dropped: ring full and overflow shards full.
    pub dropped_overflow_full: u64,
    /// Live entries dropped: table full.
    pub dropped_live_table_full: u64,
    /// Records waiting in thread rings now.
    pub ring_records: u64,
    /// Records waiting in overflow shards now.
    pub overflow_records: u64,
    /// Sampled pointers currently live.
    pub live_samples: u64,
    /// Thread rings registered now.
    pub registered_threads: u64,
    /// Duration of the last report (ns).
    pub last_report_nanos: u64,
    /// Memory held by symbol data.
    pub symbol_bytes: u64,
    /// Symbol quality of the last report, -1 before one.
    pub last_symbol_quality: c_int,
    /// Records released unreported by a stop, a fork or a failed report.
    pub records_discarded: u64,
    /// Distinct stacks held by the running session now.
    pub stacks: u64,
    /// A session is running now.
    pub active: bool,
    /// A sampling allocator has served an allocation.
    pub allocator_observed: bool,
}

/// `mp_profiler`: an exclusive profiling session (opaque).
#[repr(C)]
pub struct mp_profiler {
    _private: [u8; 0],
}

/// `MP_PROF_HOOK_FILTER_BITS`: log2 of the bits of the free-path filter.
pub const MP_PROF_HOOK_FILTER_BITS: u32 = 18;
/// `MP_PROF_HOOK_FILTER_WORDS`: 64-bit words of the free-path filter.
pub const MP_PROF_HOOK_FILTER_WORDS: usize = 1 << (MP_PROF_HOOK_FILTER_BITS - 6);
/// `MP_PROF_HOOK_SUMMARY_BYTES`: bytes of the filter's page summary.
pub const MP_PROF_HOOK_SUMMARY_BYTES: usize = 1 << 20;

/// `mp_prof_hook_filter_t`: the free-path filter, written by the library
/// under its locks and read with relaxed atomic loads.
#[repr(C)]
pub struct mp_prof_hook_filter_t {
    /// Live sampled blocks per 4 KiB page (the page number modulo 2^20).
    pub summary: [AtomicU8; MP_PROF_HOOK_SUMMARY_BYTES],
    /// One bit per filter slot.
    pub bits: [AtomicU64; MP_PROF_HOOK_FILTER_WORDS],
}

/// `mp_prof_allocator_stats`: the allocator's own view of its memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mp_prof_allocator_stats {
    /// Bytes in blocks the program holds.
    pub allocated: u64,
    /// Bytes in pages holding such blocks.
    pub active: u64,
    /// The allocator's resident bytes.
    pub resident: u64,
    /// Bytes the allocator has mapped.
    pub mapped: u64,
    /// Bytes the allocator has committed.
    pub committed: u64,
    /// Address space reserved.
    pub reserved: u64,
}

/// `mp_prof_allocator_stats_fn`: the session's statistics hook.
pub type mp_prof_allocator_stats_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, out: *mut mp_prof_allocator_stats) -> bool>;

/// `mp_prof_drop_mode`: which frames reports drop from the leaf end.
pub type mp_prof_drop_mode = c_int;
/// The allocator's entry points and the caller's pattern (the default).
pub const MP_PROF_DROP_ALLOCATOR: mp_prof_drop_mode = 0;
/// Nothing: every frame is kept.
pub const MP_PROF_DROP_NOTHING: mp_prof_drop_mode = 1;

extern "C" {
    /// Fills `cfg` with the defaults.
    pub fn mp_prof_config_init(cfg: *mut mp_prof_config);
    /// The frames every report drops from the leaf end of its stacks: the
    /// allocator's entry points plus `extra` (NULL: none), or nothing.
    pub fn mp_prof_set_drop_frames(extra: *const c_char, mode: mp_prof_drop_mode)
        -> mp_prof_status;
    /// The default pattern of `mp_prof_set_drop_frames` (a static string).
    pub fn mp_prof_drop_frames_default() -> *const c_char;
    /// Validates `cfg`, checks the sampling allocator was observed, claims the recorder.
    pub fn mp_profiler_start(
        cfg: *const mp_prof_config,
        out: *mut *mut mp_profiler,
    ) -> mp_prof_status;
    /// One uncompressed pprof (free it with `mp_prof_buffer_free`).
    pub fn mp_profiler_report(
        p: *mut mp_profiler,
        pprof: *mut *mut u8,
        len: *mut usize,
    ) -> mp_prof_status;
    /// Adds a comment to the next report.
    pub fn mp_profiler_annotate(p: *mut mp_profiler, comment: *const c_char) -> mp_prof_status;
    /// Frees a buffer returned by a report.
    pub fn mp_prof_buffer_free(pprof: *mut u8);
    /// Sets the session's allocator statistics hook.
    pub fn mp_profiler_set_allocator_stats(
        p: *mut mp_profiler,
        allocator: *const c_char,
        f: mp_prof_allocator_stats_fn,
        ctx: *mut c_void,
    ) -> mp_prof_status;
    /// Ends the session (idempotent).
    pub fn mp_profiler_stop(p: *mut mp_profiler) -> mp_prof_status;
    /// Stops the session if running and frees the handle.
    pub fn mp_profiler_free(p: *mut mp_profiler);
    /// A sentence for a status; never NULL.
    pub fn mp_prof_strerror(s: mp_prof_status) -> *const c_char;
    /// Copies the recorder's counters.
    pub fn mp_prof_diagnostics(out: *mut mp_prof_stats);
    /// The calling thread's allocations are never sampled from now on.
    pub fn mp_prof_thread_exclude();
    /// The profiling package's version.
    pub fn mp_prof_version() -> *const c_char;

    /// Template interface: the sampling path of an allocation of `size` that returned `p`.
    pub fn mp_prof_hook_sample(p: *mut c_void, size: usize) -> *mut c_void;
    /// Template interface: `p`, which passed the filter, is being freed.
    pub fn mp_prof_hook_forget(p: *mut c_void);
    /// Template interface: the identity of `p`'s live entry (0: none).
    pub fn mp_prof_hook_live_id(p: *const c_void) -> u64;
    /// Template interface: removes `p`'s live entry if it still is `id`.
    pub fn mp_prof_hook_forget_id(p: *const c_void, id: u64);
    /// Template interface: registers `[start, end)` as profiler code.
    pub fn mp_prof_hook_register(start: usize, end: usize);
    /// Template interface: the free-path filter.
    pub static mp_prof_hook_filter: mp_prof_hook_filter_t;

    /// The address of the calling thread's countdown (`<mimprof/sampling_foreign.h>`).
    pub fn mp_prof_foreign_countdown() -> *mut u64;
    /// `sizeof(mp_prof_hook_filter_t)` as the library was built.
    pub fn mp_prof_foreign_filter_size() -> usize;
}

#[cfg(feature = "pyroscope")]
mod pyroscope;
#[cfg(feature = "pyroscope")]
pub use pyroscope::*;
