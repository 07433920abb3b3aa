// SPDX-License-Identifier: MIT
//! Feature `pyroscope`: the C adapter's agent started from Rust (server,
//! application name, tags, auth, tenant) uploads the live heap.
#![cfg(feature = "pyroscope")]

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::standin::Standin;
use mimprof::pyroscope::AgentConfig;
use mimprof::SamplingAllocator;

#[global_allocator]
static A: SamplingAllocator<std::alloc::System> = SamplingAllocator::new(std::alloc::System);

#[inline(never)]
fn agent_leak_site(kept: &mut Vec<Vec<u8>>) {
    for i in 0..256 {
        kept.push(black_box(vec![i as u8; 64 << 10]));
    }
}

#[test]
fn the_agent_uploads_with_tags_auth_and_tenant() {
    let Some(server) = Standin::start() else {
        return;
    };
    // a multi-tenant server that requires these credentials
    server.control_post(
        "/config",
        r#"{"multitenancy": true, "auth": "basic:user:secret"}"#,
    );
    let agent = AgentConfig::new(&server.url(), "rust.agent.test")
        .tag("env", "ci")
        .basic_auth("user", "secret")
        .tenant("team-a")
        .upload_interval(Duration::from_millis(200))
        .profiler(mimprof::Config {
            sample_interval_bytes: 64 << 10,
            ..mimprof::Config::default()
        })
        .start()
        .expect("start");
    let mut kept = Vec::new();
    agent_leak_site(&mut kept);
    agent.stop().expect("stop");
    assert!(agent.stats().uploaded > 0);
    drop(agent);
    let live = server.total(
        "memory:inuse_space",
        &["service_name=rust.agent.test", "env=ci"],
    );
    let held = (kept.len() * (64 << 10)) as i64;
    assert!(live > 0, "nothing live on the server");
    let tsv = server.control_get("/profiles.tsv");
    assert!(
        tsv.lines().any(|l| l.starts_with("team-a\t")),
        "tenant: {tsv}"
    );
    eprintln!("server: {live} bytes live of {held} held (summed over uploads)");
}

#[test]
fn a_bad_application_name_is_a_typed_error() {
    let e = AgentConfig::new("http://127.0.0.1:1", "bad name{}")
        .start()
        .unwrap_err();
    assert_ne!(e.status(), 0);
    assert!(!e.to_string().is_empty());
}
