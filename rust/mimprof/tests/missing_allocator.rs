// SPDX-License-Identifier: MIT
//! A program whose global allocator is not a `SamplingAllocator`: starting
//! a session is refused with the typed "missing allocator" error.

use mimprof::{Config, Error, Profiler};

#[test]
fn start_without_the_sampling_allocator_is_refused() {
    let v = vec![0u8; 1 << 20]; // allocations, but not through mimprof
    std::hint::black_box(&v);
    let e = Profiler::start(&Config::default()).unwrap_err();
    assert_eq!(e, Error::AllocatorNotObserved);
    assert!(!mimprof::diagnostics().allocator_observed);
    assert!(e.to_string().contains("allocator"), "{e}");
}
