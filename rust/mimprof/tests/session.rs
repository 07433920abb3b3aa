// SPDX-License-Identifier: MIT
//! Behaviour through Rust: FIFO wrap-around under many threads, frees from
//! other threads, realloc growth and failure, session restart and the
//! stopped owner, Busy, invalid configurations, excluded threads.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{assert_within, sd_objects, session_lock, Profile};
use mimprof::{diagnostics, Config, Error, Profiler, SamplingAllocator};

#[global_allocator]
static A: SamplingAllocator<System> = SamplingAllocator::new(System);

fn config(interval: usize) -> Config {
    Config {
        sample_interval_bytes: interval,
        seed: 7,
        ..Config::default()
    }
}

#[inline(never)]
fn wrap_site(n: usize, size: usize) {
    for _ in 0..n {
        drop(black_box(vec![1u8; size]));
    }
}

#[test]
fn fifo_wraparound_under_many_threads() {
    let _g = session_lock();
    let before = diagnostics();
    let cfg = Config {
        ring_capacity: 4, // wraps every few samples
        ..config(1024)
    };
    let prof = Arc::new(Profiler::start(&cfg).unwrap());
    let (threads, n, size) = (8usize, 20_000usize, 256usize);
    let done = Arc::new(AtomicBool::new(false));
    let reporter = {
        let (prof, done) = (prof.clone(), done.clone());
        thread::spawn(move || {
            let mut sum = 0i64;
            while !done.load(Ordering::Acquire) {
                sum += Profile::decode(&prof.report().unwrap()).sum("alloc_objects", "wrap_site");
                thread::yield_now();
            }
            sum
        })
    };
    let workers: Vec<_> = (0..threads)
        .map(|_| thread::spawn(move || wrap_site(n, size)))
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let mut sum = reporter.join().unwrap();
    // a report's budget is shared fairly between rings and overflow shards:
    // what one leaves waits for the next
    for _ in 0..16 {
        sum += Profile::decode(&prof.report().unwrap()).sum("alloc_objects", "wrap_site");
        let s = diagnostics();
        if s.ring_records + s.overflow_records == 0 {
            break;
        }
    }
    let total = (threads * n) as f64;
    let after = diagnostics();
    let d = |f: fn(&mimprof::Stats) -> u64| f(&after) - f(&before);
    // Hits the recorder rejected (a contended registry, a full overflow)
    // are counted, never silent: each stood for 1/p objects.
    let dropped = d(|s| s.dropped_registration) + d(|s| s.dropped_overflow_full);
    let weight = 1.0 / (1.0 - (-(size as f64) / 1024.0).exp());
    eprintln!("wrap-around: {dropped} hits dropped and counted");
    assert_within(
        "wrap-around alloc_objects + dropped",
        sum + (dropped as f64 * weight).round() as i64,
        total,
        sd_objects(total, size as f64, 1024.0),
    );
    // (other tests' threads may be starting meanwhile: their hits still wait
    // in rings, counted by the gauges)
    assert_eq!(
        d(|s| s.samples_taken),
        after.ring_records
            + after.overflow_records
            + d(|s| s.samples_reported)
            + d(|s| s.dropped_registration)
            + d(|s| s.dropped_teardown)
            + d(|s| s.dropped_overflow_full)
            + d(|s| s.records_discarded),
        "every hit accounted for"
    );
    prof.stop().unwrap();
}

#[inline(never)]
#[allow(clippy::vec_box)] // one allocation of 512 bytes per element is the point
fn cross_site(n: usize) -> Vec<Box<[u8; 512]>> {
    // black_box: no tail call, so that this frame is on the captured stacks
    black_box((0..n).map(|_| Box::new([0u8; 512])).collect())
}

#[test]
fn frees_from_another_thread_leave_the_live_set() {
    let _g = session_lock();
    let prof = Profiler::start(&config(2048)).unwrap();
    let held = thread::spawn(|| cross_site(50_000)).join().unwrap();
    let p = Profile::decode(&prof.report().unwrap());
    assert_within(
        "cross-thread inuse_objects",
        p.sum("inuse_objects", "cross_site"),
        50_000.0,
        sd_objects(50_000.0, 512.0, 2048.0),
    );
    thread::spawn(move || drop(held)).join().unwrap();
    let p = Profile::decode(&prof.report().unwrap());
    assert_eq!(p.sum("inuse_objects", "cross_site"), 0);
    prof.stop().unwrap();
}

#[inline(never)]
fn grow_site() -> Vec<u8> {
    let mut v: Vec<u8> = Vec::with_capacity(4096);
    while v.capacity() < 1 << 20 {
        let c = v.capacity();
        v.reserve_exact(c * 2 - v.len()); // a realloc of the same block
    }
    v
}

#[test]
fn realloc_growth_keeps_one_live_block() {
    let _g = session_lock();
    let prof = Profiler::start(&config(1)).unwrap(); // every block sampled
    let v = black_box(grow_site());
    let p = Profile::decode(&prof.report().unwrap());
    assert_eq!(p.sum("inuse_objects", "grow_site"), 1);
    assert_eq!(p.sum("inuse_space", "grow_site"), v.capacity() as i64);
    assert!(
        p.sum("alloc_objects", "grow_site") >= 9,
        "each realloc is an allocation"
    );
    drop(v);
    let p = Profile::decode(&prof.report().unwrap());
    assert_eq!(p.sum("inuse_objects", "grow_site"), 0);
    prof.stop().unwrap();
}

#[inline(never)]
fn fail_site(layout: Layout) -> *mut u8 {
    // SAFETY: a non-zero layout. (black_box: no tail call, this frame stays)
    black_box(unsafe { A.alloc(layout) })
}

#[test]
fn failed_realloc_keeps_the_old_block_live() {
    let _g = session_lock();
    let prof = Profiler::start(&config(1)).unwrap();
    let layout = Layout::from_size_align(4096, 8).unwrap();
    let p = fail_site(layout);
    assert!(!p.is_null());
    // SAFETY: `p` is live with `layout`; the size is valid and too large.
    let q = unsafe { A.realloc(p, layout, isize::MAX as usize - 8192) };
    assert!(q.is_null(), "the provider failed");
    let prof_now = Profile::decode(&prof.report().unwrap());
    assert_eq!(prof_now.sum("inuse_objects", "fail_site"), 1, "rollback");
    assert_eq!(prof_now.sum("inuse_space", "fail_site"), 4096);
    // SAFETY: `p` is still live (the realloc failed).
    unsafe { A.dealloc(p, layout) };
    let after = Profile::decode(&prof.report().unwrap());
    assert_eq!(after.sum("inuse_objects", "fail_site"), 0);
    prof.stop().unwrap();
}

#[test]
fn restart_and_the_stopped_owner() {
    let _g = session_lock();
    let first = Profiler::start(&config(4096)).unwrap();
    first.report().unwrap();
    assert_eq!(Profiler::start(&config(4096)).unwrap_err(), Error::Busy);
    first.stop().unwrap();
    assert_eq!(first.report().unwrap_err(), Error::Inactive);
    let second = Profiler::start(&config(4096)).unwrap();
    first.stop().unwrap(); // idempotent, and no effect on the second session
    drop(first);
    assert!(diagnostics().active);
    let p = Profile::decode(&second.report().unwrap());
    assert!(p.sample_types.iter().any(|(t, _)| t == "inuse_space"));
    drop(second);
    assert!(!diagnostics().active);
}

#[test]
fn invalid_configuration_is_refused() {
    let _g = session_lock();
    let e = Profiler::start(&config(0)).unwrap_err();
    assert_eq!(e, Error::InvalidConfig);
    let bad_depth = Config {
        max_stack_depth: 0,
        ..Config::default()
    };
    assert_eq!(
        Profiler::start(&bad_depth).unwrap_err(),
        Error::InvalidConfig
    );
}

#[inline(never)]
fn excluded_site() -> Vec<Vec<u8>> {
    (0..1000).map(|_| vec![0u8; 4096]).collect()
}

#[test]
fn excluded_threads_are_not_sampled() {
    let _g = session_lock();
    let prof = Profiler::start(&config(1)).unwrap();
    let held = thread::spawn(|| {
        mimprof::exclude_current_thread();
        excluded_site()
    })
    .join()
    .unwrap();
    let p = Profile::decode(&prof.report().unwrap());
    assert_eq!(p.sum("alloc_objects", "excluded_site"), 0);
    drop(held);
    prof.stop().unwrap();
}

#[test]
fn errors_read_as_the_c_sentences() {
    for e in [
        Error::Busy,
        Error::Inactive,
        Error::AllocatorNotObserved,
        Error::InvalidConfig,
    ] {
        let s = e.to_string();
        assert!(!s.is_empty() && !s.contains("unknown"), "{e:?}: {s}");
        assert_eq!(Error::from_status(e.status()), Some(e));
    }
    assert_eq!(Error::from_status(0), None);
    assert_ne!(Error::Busy.to_string(), Error::Inactive.to_string());
}

#[test]
fn the_filter_layout_is_the_libraries() {
    // SAFETY: no precondition.
    let c = unsafe { mimprof_sys::mp_prof_foreign_filter_size() };
    assert_eq!(c, std::mem::size_of::<mimprof_sys::mp_prof_hook_filter_t>());
    assert_eq!(mimprof::version(), env!("CARGO_PKG_VERSION"));
}

#[inline(never)]
fn boxed_site() -> Vec<Box<[u8; 4096]>> {
    let mut keep = Vec::with_capacity(400);
    for _ in 0..400 {
        keep.push(Box::new(black_box([1u8; 4096])));
    }
    black_box(keep)
}

/// Vecs grown by push: RawVec's growth (alloc::raw_vec::*, out of line).
#[inline(never)]
fn grown_site() -> Vec<Vec<u32>> {
    let mut out = Vec::with_capacity(200);
    for _ in 0..200 {
        let mut v = Vec::new();
        for i in 0..4096u32 {
            v.push(black_box(i));
        }
        out.push(v);
    }
    black_box(out)
}

/// The innermost frame of each sample that holds `site`.
fn leaves(p: &Profile, site: &str) -> Vec<String> {
    p.samples
        .iter()
        .map(|s| p.frames(s))
        .filter(|f| f.iter().any(|n| n.contains(site)))
        .map(|f| f[0].clone())
        .collect()
}

/// Reports of boxed_site and grown_site under `drop`: their leaves.
fn site_leaves(drop: mimprof::DropFrames) -> (Vec<String>, Vec<String>) {
    let cfg = Config {
        drop_frames: drop,
        ..config(4096)
    };
    let prof = Profiler::start(&cfg).unwrap();
    let held = (boxed_site(), grown_site());
    let p = Profile::decode(&prof.report().unwrap());
    drop_held(held);
    prof.stop().unwrap();
    (leaves(&p, "boxed_site"), leaves(&p, "grown_site"))
}

fn drop_held<T>(t: T) {
    drop(black_box(t));
}

#[test]
fn allocator_frames_are_not_the_leaf() {
    let _g = session_lock();
    // The crate's own frames are never the leaf; a Box::new inlined here
    // calls __rust_alloc, which jumps to them: the site is the leaf.
    // RawVec's growth is dropped by default (the pushing function is the
    // leaf), kept with DropFrames::Nothing.
    let (boxed, grown) = site_leaves(mimprof::DropFrames::Allocator);
    assert!(!boxed.is_empty() && !grown.is_empty());
    assert!(boxed.iter().all(|f| f.contains("boxed_site")), "{boxed:?}");
    assert!(grown.iter().all(|f| f.contains("grown_site")), "{grown:?}");
    let (boxed, grown) = site_leaves(mimprof::DropFrames::Nothing);
    assert!(boxed.iter().all(|f| f.contains("boxed_site")), "{boxed:?}");
    assert!(grown.iter().any(|f| f.contains("raw_vec")), "{grown:?}");
    let (boxed, _) = site_leaves(mimprof::DropFrames::AllocatorAnd(".*boxed_site"));
    assert!(boxed.is_empty(), "{boxed:?}");

    let bad = Config {
        drop_frames: mimprof::DropFrames::AllocatorAnd("boxed_(site"),
        ..config(4096)
    };
    assert_eq!(Profiler::start(&bad).unwrap_err(), Error::InvalidConfig);
    assert!(mimprof::drop_frames_default().contains("operator new"));
}
