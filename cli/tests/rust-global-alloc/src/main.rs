// SPDX-License-Identifier: MIT
//! Keeps `rounds` (first argument, default 65536) 1 KiB blocks from the
//! mimalloc crate's allocator, statically linked: 64 MiB that malloc
//! never sees. Prints how many it kept.
use std::hint::black_box;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(65536);
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let mut b = vec![1u8; 1024];
        b[i % 1024] = i as u8;
        kept.push(black_box(b));
    }
    println!("{} blocks kept", kept.len());
    std::mem::forget(kept);
}
