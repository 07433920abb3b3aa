// SPDX-License-Identifier: MIT
//! A service that leaks slowly, profiled by mimprof and pushed to
//! Pyroscope by the C adapter's agent.
//!
//! ```sh
//! cargo run --release --example service --features mimalloc,pyroscope -- \
//!     http://localhost:4040 [seconds]
//! ```
//!
//! In Pyroscope: `memory:inuse_space` of `example.service` grows, and its
//! flame graph names `service::Cache::remember`.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static A: mimprof::MiMalloc = mimprof::MIMALLOC;

/// A cache that never forgets: the slow leak.
#[derive(Default)]
struct Cache {
    entries: HashMap<u64, Vec<u8>>,
}

impl Cache {
    #[inline(never)]
    fn remember(&mut self, key: u64) {
        self.entries.insert(key, vec![key as u8; 16 << 10]);
    }
}

/// Short-lived work: allocated and freed within the request.
#[inline(never)]
fn handle_request(i: u64) -> usize {
    let body: Vec<String> = (0..64).map(|j| format!("item {i}.{j}")).collect();
    black_box(body.iter().map(String::len).sum())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server = args
        .next()
        .unwrap_or_else(|| "http://localhost:4040".into());
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60);

    let agent = mimprof::pyroscope::AgentConfig::new(&server, "example.service")
        .tag("env", "dev")
        .upload_interval(Duration::from_secs(1))
        .start()?;

    let mut cache = Cache::default();
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        handle_request(i);
        if i % 20 == 0 {
            cache.remember(i);
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    agent.stop()?;
    let s = agent.stats();
    eprintln!(
        "{i} requests, {} entries cached; {} profiles uploaded, {} dropped",
        cache.entries.len(),
        s.uploaded,
        s.dropped_queue_full
            + s.dropped_rejected
            + s.dropped_retry_exhausted
            + s.dropped_stop_deadline
    );
    Ok(())
}
