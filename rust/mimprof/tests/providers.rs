// SPDX-License-Identifier: MIT
//! The ready providers (features `mimalloc`, `jemalloc`): each one, as the
//! global allocator, reconstructs a population and forgets it when freed.
//! One binary per provider is what a program is; here the provider under
//! test is the global one and the other is used through `GlobalAlloc`.
#![cfg(all(feature = "mimalloc", feature = "jemalloc"))]

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

use common::{assert_within, sd_objects, session_lock, Profile};
use mimprof::{Config, Profiler};

#[global_allocator]
static A: mimprof::MiMalloc = mimprof::MIMALLOC;

static J: mimprof::Jemalloc = mimprof::JEMALLOC;

#[inline(never)]
fn mimalloc_site(held: &mut Vec<Box<[u8]>>, n: usize) {
    for _ in 0..n {
        held.push(black_box(vec![7u8; 1000].into_boxed_slice()));
    }
}

#[inline(never)]
fn jemalloc_site(held: &mut Vec<*mut u8>, n: usize, layout: Layout) {
    for _ in 0..n {
        // SAFETY: a non-zero layout; freed below with the same.
        held.push(black_box(unsafe { J.alloc(layout) }));
    }
}

fn config() -> Config {
    Config {
        sample_interval_bytes: 4096,
        seed: 3,
        ..Config::default()
    }
}

#[test]
fn mimalloc_and_jemalloc_populations() {
    let _g = session_lock();
    let prof = Profiler::start(&config()).unwrap();
    let n = 100_000;
    let mut held = Vec::with_capacity(n);
    mimalloc_site(&mut held, n);
    let layout = Layout::from_size_align(2000, 16).unwrap();
    let mut raw = Vec::with_capacity(n);
    jemalloc_site(&mut raw, n, layout);
    let p = Profile::decode(&prof.report().unwrap());
    let sd = |s| sd_objects(n as f64, s, 4096.0);
    assert_within(
        "mimalloc inuse_objects",
        p.sum("inuse_objects", "mimalloc_site"),
        n as f64,
        sd(1000.0),
    );
    assert_within(
        "jemalloc inuse_objects",
        p.sum("inuse_objects", "jemalloc_site"),
        n as f64,
        sd(2000.0),
    );
    drop(held);
    for q in raw {
        // SAFETY: allocated above with `layout`.
        unsafe { J.dealloc(q, layout) };
    }
    let p = Profile::decode(&prof.report().unwrap());
    assert_eq!(p.sum("inuse_objects", "mimalloc_site"), 0);
    assert_eq!(p.sum("inuse_objects", "jemalloc_site"), 0);
    prof.stop().unwrap();
}
