// SPDX-License-Identifier: MIT
//! The design's population test through Rust: allocations made through
//! `SamplingAllocator` are reconstructed by the C recorder's estimator
//! (objects and bytes, within the variance-derived tolerance), for several
//! sizes and intervals, live and allocated.

mod common;

use std::alloc::System;
use std::hint::black_box;

use common::{assert_within, sd_objects, session_lock, Profile};
use mimprof::{Config, Profiler, SamplingAllocator};

#[global_allocator]
static A: SamplingAllocator<System> = SamplingAllocator::new(System);

fn config(interval: usize) -> Config {
    Config {
        sample_interval_bytes: interval,
        seed: std::env::var("MIMPROF_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(42),
        ..Config::default()
    }
}

/// `n` blocks of `size` bytes into `held` (allocated by the caller, so that
/// this function makes exactly the `n` allocations of `size` bytes).
#[inline(never)]
fn population_site(held: &mut Vec<Box<[u8]>>, n: usize, size: usize) {
    for _ in 0..n {
        held.push(black_box(vec![0u8; size].into_boxed_slice()));
    }
}

fn check_population(n: usize, size: usize, interval: usize) {
    let _g = session_lock();
    let prof = Profiler::start(&config(interval)).expect("start");
    let mut held = Vec::with_capacity(n);
    population_site(&mut held, n, size);
    let pb = prof.report().expect("report");
    let p = Profile::decode(&pb);
    let sd = sd_objects(n as f64, size as f64, interval as f64);
    let tag = format!("{n} x {size} B at {interval} B");
    let site = "population_site";
    assert_within(
        &format!("{tag}: inuse_objects"),
        p.sum("inuse_objects", site),
        n as f64,
        sd,
    );
    assert_within(
        &format!("{tag}: inuse_space"),
        p.sum("inuse_space", site),
        (n * size) as f64,
        sd * size as f64,
    );
    assert_within(
        &format!("{tag}: alloc_objects"),
        p.sum("alloc_objects", site),
        n as f64,
        sd,
    );
    assert_within(
        &format!("{tag}: alloc_space"),
        p.sum("alloc_space", site),
        (n * size) as f64,
        sd * size as f64,
    );
    // captured stacks start at the application: no frame of the allocator's
    // sampling path above the allocating function
    let c = p.column("inuse_objects");
    for s in p.samples.iter().filter(|s| s.values[c] > 0) {
        let frames = p.frames(s);
        if frames.iter().any(|f| f.contains(site)) {
            assert!(
                !frames[0].contains("alloc_slow") && !frames[0].contains("SamplingAllocator"),
                "top frame is the allocator's: {frames:?}"
            );
        }
    }
    drop(held);
    let p = Profile::decode(&prof.report().expect("report"));
    assert_eq!(
        p.sum("inuse_objects", site),
        0,
        "{tag}: freed blocks still live"
    );
    prof.stop().expect("stop");
}

#[test]
fn five_hundred_thousand_768_byte_objects_at_1_kib() {
    check_population(500_000, 768, 1024);
}

#[test]
fn small_objects_sparse_interval() {
    check_population(200_000, 64, 4096);
}

#[test]
fn page_objects_at_64_kib() {
    check_population(50_000, 4096, 64 << 10);
}

#[test]
fn large_objects_default_interval() {
    check_population(2_000, 100_000, 512 << 10);
}
