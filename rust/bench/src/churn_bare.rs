// SPDX-License-Identifier: MIT
//! Churn over the bare `mimalloc` crate's allocator (the baseline).
#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod churn;

fn main() {
    churn::run();
}
