// SPDX-License-Identifier: MIT
//! Churn over `mimprof::MiMalloc` (no session: the unsampled fast path
//! the program always pays; with MIMPROF_BENCH_SESSION=1 a session at the
//! default 512 KiB interval runs).
#[global_allocator]
static A: mimprof::MiMalloc = mimprof::MIMALLOC;

mod churn;

fn main() {
    let _session = std::env::var_os("MIMPROF_BENCH_SESSION")
        .map(|_| mimprof::Profiler::start(&mimprof::Config::default()).expect("start"));
    churn::run();
}
