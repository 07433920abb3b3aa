// SPDX-License-Identifier: MIT
//! The profiler's errors: the C status codes as a Rust enum.

use core::ffi::CStr;
use core::fmt;

use mimprof_sys as sys;

/// An error of the profiler, mapped from `mp_prof_status`; its `Display`
/// is the C library's sentence (`mp_prof_strerror`). Independent of any
/// uploader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// A configuration field is out of range.
    InvalidConfig,
    /// No sampling allocator has served an allocation in this process: the
    /// program's `#[global_allocator]` is not a [`SamplingAllocator`](crate::SamplingAllocator).
    AllocatorNotObserved,
    /// Another live session owns the process recorder.
    Busy,
    /// The session was stopped.
    Inactive,
    /// Out of memory.
    OutOfMemory,
    /// An internal invariant of the C library failed (a bug).
    Internal,
    /// A file could not be read or written.
    Io,
    /// Not available on this platform or in this build of the C library.
    Unsupported,
    /// A heap image could not be read or was refused.
    BadImage,
    /// A status this crate does not know (a newer C library).
    Other(i32),
}

impl Error {
    /// The error of a C status; `None` for `MP_PROF_OK`.
    pub fn from_status(status: i32) -> Option<Error> {
        Some(match status {
            sys::MP_PROF_OK => return None,
            sys::MP_PROF_E_INVALID_CONFIG => Error::InvalidConfig,
            sys::MP_PROF_E_ALLOCATOR_NOT_OBSERVED => Error::AllocatorNotObserved,
            sys::MP_PROF_E_BUSY => Error::Busy,
            sys::MP_PROF_E_INACTIVE => Error::Inactive,
            sys::MP_PROF_E_NOMEM => Error::OutOfMemory,
            sys::MP_PROF_E_INTERNAL => Error::Internal,
            sys::MP_PROF_E_IO => Error::Io,
            sys::MP_PROF_E_UNSUPPORTED => Error::Unsupported,
            sys::MP_PROF_E_BAD_IMAGE => Error::BadImage,
            other => Error::Other(other),
        })
    }

    /// The C status code of this error.
    pub fn status(&self) -> i32 {
        match *self {
            Error::InvalidConfig => sys::MP_PROF_E_INVALID_CONFIG,
            Error::AllocatorNotObserved => sys::MP_PROF_E_ALLOCATOR_NOT_OBSERVED,
            Error::Busy => sys::MP_PROF_E_BUSY,
            Error::Inactive => sys::MP_PROF_E_INACTIVE,
            Error::OutOfMemory => sys::MP_PROF_E_NOMEM,
            Error::Internal => sys::MP_PROF_E_INTERNAL,
            Error::Io => sys::MP_PROF_E_IO,
            Error::Unsupported => sys::MP_PROF_E_UNSUPPORTED,
            Error::BadImage => sys::MP_PROF_E_BAD_IMAGE,
            Error::Other(s) => s,
        }
    }
}

/// `Ok(())` for `MP_PROF_OK`, the error otherwise.
pub(crate) fn check(status: i32) -> Result<(), Error> {
    match Error::from_status(status) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: mp_prof_strerror never returns NULL; the sentence is static.
        let s = unsafe { CStr::from_ptr(sys::mp_prof_strerror(self.status())) };
        f.write_str(&s.to_string_lossy())
    }
}

impl std::error::Error for Error {}
