// SPDX-License-Identifier: MIT
// The churn loop shared by both binaries: N pairs of Box::new/drop of 64
// bytes through the global allocator (alloc + dealloc each), so that the
// difference of two runs' instruction counts divided by the difference of
// their N is the cost of one pair (start-up cancels out).
use std::hint::black_box;

pub fn run() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("usage: churn-<kind> N");
    for i in 0..n {
        let b = black_box(Box::new([i; 8]));
        drop(b);
    }
}
