// SPDX-License-Identifier: MIT
// A Rust program for tool-rust (test_rust.py), built there with
// `rustc -O -g -C symbol-mangling-version=v0`: it keeps `rounds` KiB
// blocks in a generic store (leaky::cache::Store<T>::remember) under
// std's runtime (std::rt::lang_start_internal), so its profile names v0
// frames of both the program and std. Built with `--cfg own_allocator`,
// its allocations go through a #[global_allocator] of its own that maps
// memory with mmap directly (8 KiB of RSS a block), bypassing malloc as
// a statically linked allocator does: mimprof sees none of them.
use std::hint::black_box;

/// Whole pages from mmap for every allocation, the length in a header
/// page before the block (page-aligned: any alignment up to 4 KiB holds).
#[cfg(own_allocator)]
mod mapper {
    use std::alloc::{GlobalAlloc, Layout};

    extern "C" {
        fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
        fn munmap(addr: *mut u8, len: usize) -> i32;
    }
    const PROT_RW: i32 = 0x1 | 0x2;
    const MAP_PRIVATE_ANON: i32 = 0x02 | 0x20;
    const PAGE: usize = 4096;

    pub struct Mapper;

    unsafe impl GlobalAlloc for Mapper {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            if l.align() > PAGE {
                return std::ptr::null_mut();
            }
            let len = ((l.size() + PAGE - 1) & !(PAGE - 1)) + PAGE;
            let p = mmap(std::ptr::null_mut(), len, PROT_RW, MAP_PRIVATE_ANON, -1, 0);
            if p as isize == -1 {
                return std::ptr::null_mut();
            }
            *(p as *mut usize) = len;
            p.add(PAGE)
        }
        unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
            let base = p.sub(PAGE);
            munmap(base, *(base as *mut usize));
        }
    }
}

#[cfg(own_allocator)]
#[global_allocator]
static GLOBAL: mapper::Mapper = mapper::Mapper;

pub mod cache {
    pub struct Store<T> {
        kept: Vec<T>,
    }

    impl<T: Clone> Store<T> {
        pub fn new() -> Self {
            Store { kept: Vec::new() }
        }
        #[inline(never)]
        pub fn remember(&mut self, t: &T) {
            self.kept.push(t.clone());
        }
        pub fn len(&self) -> usize {
            self.kept.len()
        }
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(4096);
    let mut store = cache::Store::new();
    let block = vec![7u8; 1024];
    for i in 0..rounds {
        let mut b = block.clone();
        b[i % 1024] = i as u8;
        store.remember(black_box(&b));
    }
    println!("{} blocks kept", store.len());
    std::mem::forget(store); // leaked: live in the exit report
}
