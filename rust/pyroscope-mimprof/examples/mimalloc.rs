// SPDX-License-Identifier: MIT
//! mimalloc heap profiling with the pyroscope crate's agent, beside
//! pyroscope-rs's own `examples/jemalloc.rs`: the same agent, a mimprof
//! backend instead of `jemalloc_pprof`.
//!
//! ```sh
//! cargo run --example mimalloc -- http://localhost:4040 [seconds]
//! ```
//!
//! Needs, in Cargo.toml:
//!
//! ```toml
//! pyroscope = { version = "2.1", default-features = false } # or with rustls-tls
//! pyroscope-mimprof = "0.1"
//! mimprof = { version = "0.1", features = ["mimalloc"] }
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use pyroscope::pyroscope::PyroscopeAgentBuilder;
use pyroscope_mimprof::mimprof_backend;

// mimalloc, sampled by mimprof, as the global allocator.
#[global_allocator]
static ALLOC: mimprof::MiMalloc = mimprof::MIMALLOC;

#[inline(never)]
fn leak_a_little(kept: &mut Vec<Vec<u8>>, i: usize) {
    kept.push(black_box(vec![i as u8; 64 << 10])); // 64 KiB that stays
}

#[inline(never)]
fn churn(i: usize) {
    for j in 0..100 {
        let v: Vec<u8> = vec![0u8; 1024 * (1 + (i + j) % 256)];
        black_box(&v);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://localhost:4040".into());
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);

    let agent = PyroscopeAgentBuilder::new(
        url,
        "example.mimalloc",
        100,
        "pyroscope-rs",
        env!("CARGO_PKG_VERSION"),
        mimprof_backend(mimprof::Config::default()),
    )
    .tags(vec![("env", "dev")])
    .build()?;
    let running = agent.start()?;

    let start = Instant::now();
    let mut kept = Vec::new();
    let mut i = 0;
    while start.elapsed() < Duration::from_secs(seconds) {
        churn(i);
        if i % 10 == 0 {
            leak_a_little(&mut kept, i);
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("{i} iterations, {} KiB kept", kept.len() * 64);

    running.stop()?.shutdown();
    Ok(())
}
