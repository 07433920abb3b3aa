// SPDX-License-Identifier: MIT
//! The pyroscope crate's agent over the mimprof backend, against the
//! workspace's Pyroscope stand-in: the live heap of a leaking site arrives
//! under the application's name and tags.

#[path = "../../mimprof/tests/common/standin.rs"]
mod standin;

use std::hint::black_box;

use pyroscope::pyroscope::PyroscopeAgentBuilder;
use pyroscope_mimprof::mimprof_backend;

#[global_allocator]
static A: mimprof::MiMalloc = mimprof::MIMALLOC;

#[inline(never)]
fn leak_site(kept: &mut Vec<Vec<u8>>) {
    for i in 0..256 {
        kept.push(black_box(vec![i as u8; 64 << 10]));
    }
}

#[test]
fn reports_reach_the_server_as_mimprof_pprof() {
    let Some(server) = standin::Standin::start() else {
        return;
    };
    let cfg = mimprof::Config {
        sample_interval_bytes: 64 << 10,
        ..mimprof::Config::default()
    };
    let agent = PyroscopeAgentBuilder::new(
        server.url(),
        "rust.backend.test",
        100,
        "pyroscope-rs",
        "test",
        mimprof_backend(cfg),
    )
    .tags(vec![("env", "ci")])
    .build()
    .expect("build");
    let running = agent.start().expect("start");
    let mut kept = Vec::new();
    leak_site(&mut kept);
    running.stop().expect("stop").shutdown();

    let labels = ["service_name=rust.backend.test", "env=ci"];
    let live = server.total("memory:inuse_space", &labels);
    let held = (kept.len() * (64 << 10)) as i64;
    // the estimate of 16 MiB held in 64 KiB blocks at a 64 KiB interval:
    // 256 blocks, each sampled with p = 1 - 1/e (sd 5%)
    assert!(
        (live - held).abs() < held / 3,
        "inuse_space on the server {live}, held {held}"
    );
    assert!(server.total("memory:alloc_objects", &labels) > 0);
}
