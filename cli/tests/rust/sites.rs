// SPDX-License-Identifier: MIT
// Rust allocation sites for tool-alloc-sites (test_alloc_sites.py), built
// there with `rustc -O -C debuginfo=...` at three debug-info levels: each
// function allocates one way and everything is kept until exit, so each
// site's memory is live in the exit report.
use std::hint::black_box;

pub mod sites {
    /// Box::new of a 4 KiB array.
    #[inline(never)]
    pub fn boxed(keep: &mut Vec<Box<[u8; 4096]>>) {
        keep.push(Box::new(std::hint::black_box([1u8; 4096])));
    }

    /// Vec::with_capacity of 8 KiB.
    #[inline(never)]
    pub fn with_capacity(keep: &mut Vec<Vec<u8>>) {
        let mut v: Vec<u8> = Vec::with_capacity(8192);
        v.push(1);
        keep.push(v);
    }

    /// A Vec grown by push to 4 KiB (RawVec's growth).
    #[inline(never)]
    pub fn grown(keep: &mut Vec<Vec<u32>>) {
        let mut v = Vec::new();
        for i in 0..1024u32 {
            v.push(std::hint::black_box(i));
        }
        keep.push(v);
    }
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut boxes = Vec::with_capacity(rounds);
    let mut vecs = Vec::with_capacity(rounds);
    let mut grown = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        sites::boxed(&mut boxes);
        sites::with_capacity(&mut vecs);
        sites::grown(&mut grown);
    }
    println!("{} rounds", black_box(rounds));
    std::mem::forget(black_box((boxes, vecs, grown)));
}
