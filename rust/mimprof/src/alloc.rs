// SPDX-License-Identifier: MIT
//! `SamplingAllocator<A>`: the C template of `<mimprof/sampling.h>` written
//! as a `GlobalAlloc`, entering the same recorder through the entry points
//! of `<mimprof/sampling_foreign.h>`.
//!
//! The countdown is the C library's own thread-local
//! (`mp_prof_hook_countdown`): stable Rust cannot name a C thread-local,
//! so each thread keeps its address in a Rust thread-local, fetched on the
//! thread's first allocation. Sharing it (rather than keeping a second
//! countdown) is what makes the session generations, the recursion guard
//! and `mp_prof_thread_exclude` apply to Rust allocations unchanged.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ffi::c_void;
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use mimprof_sys as sys;

thread_local! {
    /// This thread's `mp_prof_hook_countdown`, null until its first
    /// allocation. Const-initialized and without a destructor, so it is a
    /// plain `#[thread_local]` on ELF: no lazy registration, and usable
    /// during thread teardown.
    static COUNTDOWN: Cell<*mut u64> = const { Cell::new(ptr::null_mut()) };
}

/// A [`GlobalAlloc`] that samples the allocations of its provider `A`.
///
/// The provider is a statically dispatched field: every operation
/// (`alloc`, `alloc_zeroed`, `dealloc`, `realloc`) forwards exactly the
/// pointer and layout it was given to that same field. On top of it:
///
/// - an allocation subtracts its size from the thread's byte countdown;
///   while that stays non-negative nothing else happens (no recursion
///   guard, no lock, no call);
/// - when it goes below zero, the block is reported to the C library's
///   recorder (`mp_prof_hook_sample`), which draws the next exponential
///   interval (one RNG draw) and, while a [`Profiler`](crate::Profiler)
///   session runs, records the block with its stack and the weight
///   `1/p`, `p = 1 - exp(-size/interval)`;
/// - a free tests the library's free-path filter (a byte of a page
///   summary, then a bit) and only for a possibly sampled block removes
///   it from the live table, from whichever thread frees it;
/// - a realloc is a free of the old block and an allocation of the new
///   one; when the provider fails, the old block keeps its live entry.
///
/// ```
/// use mimprof::SamplingAllocator;
/// #[global_allocator]
/// static A: SamplingAllocator<std::alloc::System> = SamplingAllocator::new(std::alloc::System);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct SamplingAllocator<A: GlobalAlloc> {
    provider: A,
}

impl<A: GlobalAlloc> SamplingAllocator<A> {
    /// Wraps `provider`.
    pub const fn new(provider: A) -> Self {
        SamplingAllocator { provider }
    }

    /// The provider every operation forwards to.
    pub const fn provider(&self) -> &A {
        &self.provider
    }
}

/// Subtracts `size` from the countdown at `cd`; true when it went below
/// zero (read as signed), as `mp_prof_hook_consume` of the C template.
#[inline(always)]
unsafe fn consume(cd: *mut u64, size: usize) -> bool {
    let left = (*cd).wrapping_sub(size as u64);
    *cd = left;
    (left as i64) < 0
}

/// The free-path filter test of the C template (`mp_prof_hook_maybe_sampled`):
/// false for every block that is surely not sampled.
#[inline(always)]
fn maybe_sampled(p: *const u8) -> bool {
    let a = p as usize as u64;
    // The summary byte: the page number modulo 2^20, from the low 32 bits
    // (one 32-bit move and shift). Its low 12 bits are the filter word
    // (MP_PROF_HOOK_SUMMARY_INDEX_ and MP_PROF_HOOK_FILTER_WORD_ of the C
    // header), so the word needs no second shift of the address.
    let s = ((a as u32) >> 12) as usize;
    // SAFETY: the filter is a static of the library, only ever read here
    // with relaxed atomic loads; both indices are in range by construction
    // (a 32-bit number >> 12 is below 2^20; the word is masked).
    unsafe {
        let filter = &sys::mp_prof_hook_filter;
        if filter.summary.get_unchecked(s).load(Ordering::Relaxed) == 0 {
            return false;
        }
        let w = s & (sys::MP_PROF_HOOK_FILTER_WORDS - 1);
        let x = filter.bits.get_unchecked(w).load(Ordering::Relaxed);
        (x >> ((a >> 6) & 63)) & 1 != 0
    }
}

static HOOKS_REGISTERED: AtomicBool = AtomicBool::new(false);

#[cfg(target_os = "linux")]
extern "C" {
    // The bounds of this program's `mimprof_hooks` section (the linker
    // defines them: the section exists because the sampling paths below
    // are placed in it).
    #[link_name = "__start_mimprof_hooks"]
    static HOOKS_START: u8;
    #[link_name = "__stop_mimprof_hooks"]
    static HOOKS_STOP: u8;
}

/// A thread's first allocation: fetch its countdown's address, and once
/// per process register the sampling paths as profiler code, so that
/// captured stacks start at the allocating function.
#[cold]
#[inline(never)]
fn thread_countdown() -> *mut u64 {
    if !HOOKS_REGISTERED.swap(true, Ordering::Relaxed) {
        #[cfg(target_os = "linux")]
        // SAFETY: only the symbols' addresses are taken.
        unsafe {
            sys::mp_prof_hook_register(
                ptr::addr_of!(HOOKS_START) as usize,
                ptr::addr_of!(HOOKS_STOP) as usize,
            );
        }
    }
    // SAFETY: no precondition; the address stays valid in this thread.
    let cd = unsafe { sys::mp_prof_foreign_countdown() };
    COUNTDOWN.with(|c| c.set(cd));
    cd
}

impl<A: GlobalAlloc> SamplingAllocator<A> {
    /// The sampling path of `alloc`/`alloc_zeroed`: a thread's first
    /// allocation, or the countdown went below zero. Ends in a call to
    /// the recorder whose result it returns (a tail call), so that its
    /// own frame is gone when the stack is captured.
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "mimprof_hooks")]
    unsafe fn alloc_slow(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if COUNTDOWN.with(Cell::get).is_null() && !consume(thread_countdown(), layout.size()) {
            return self.provider_alloc(layout, zeroed);
        }
        let p = self.provider_alloc(layout, zeroed);
        sys::mp_prof_hook_sample(p.cast::<c_void>(), layout.size()).cast::<u8>()
    }

    #[inline(always)]
    unsafe fn provider_alloc(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if zeroed {
            self.provider.alloc_zeroed(layout)
        } else {
            self.provider.alloc(layout)
        }
    }

    /// The sampling path of `realloc`: a hit, a thread's first allocation,
    /// or an old block that may be sampled.
    #[cold]
    #[inline(never)]
    #[cfg_attr(target_os = "linux", link_section = "mimprof_hooks")]
    unsafe fn realloc_slow(
        &self,
        p: *mut u8,
        layout: Layout,
        new_size: usize,
        mut hit: bool,
    ) -> *mut u8 {
        if COUNTDOWN.with(Cell::get).is_null() {
            hit = consume(thread_countdown(), new_size);
        }
        let id = if maybe_sampled(p) {
            sys::mp_prof_hook_live_id(p.cast::<c_void>())
        } else {
            0
        };
        let q = self.provider.realloc(p, layout, new_size);
        if !q.is_null() && id != 0 {
            // the old block is gone; if the provider failed it stays
            // live, with its entry (rollback)
            sys::mp_prof_hook_forget_id(p.cast::<c_void>(), id);
        }
        if hit {
            return sys::mp_prof_hook_sample(q.cast::<c_void>(), new_size).cast::<u8>();
        }
        q
    }
}

// SAFETY: every operation forwards its arguments unchanged to the
// provider, which upholds the contract; the profiler only observes
// pointers (it never frees, moves or writes to a block).
unsafe impl<A: GlobalAlloc> GlobalAlloc for SamplingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let cd = COUNTDOWN.with(Cell::get);
        if !cd.is_null() && !consume(cd, layout.size()) {
            return self.provider.alloc(layout);
        }
        self.alloc_slow(layout, false)
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let cd = COUNTDOWN.with(Cell::get);
        if !cd.is_null() && !consume(cd, layout.size()) {
            return self.provider.alloc_zeroed(layout);
        }
        self.alloc_slow(layout, true)
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if maybe_sampled(p) {
            sys::mp_prof_hook_forget(p.cast::<c_void>());
        }
        self.provider.dealloc(p, layout)
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let cd = COUNTDOWN.with(Cell::get);
        let hit = cd.is_null() || consume(cd, new_size);
        if hit || maybe_sampled(p) {
            return self.realloc_slow(p, layout, new_size, hit && !cd.is_null());
        }
        self.provider.realloc(p, layout, new_size)
    }
}

/// From now until it exits, the calling thread's allocations are never
/// sampled and consume no sampling interval (`mp_prof_thread_exclude`):
/// for the threads of a profiler's own machinery, such as an uploader.
/// Its frees are still tracked.
pub fn exclude_current_thread() {
    // SAFETY: no precondition.
    unsafe { sys::mp_prof_thread_exclude() }
}

/// Runs `f` with this thread's countdown parked, as the C library's
/// recursion guard does: its allocations (a report's copy) are the
/// profiler's own, never sampled and consuming no interval.
pub(crate) fn unsampled<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(*mut u64, u64);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: the countdown of this thread, taken below.
            unsafe { *self.0 = self.1 }
        }
    }
    // SAFETY: the countdown is this thread's; a signal handler that
    // allocates meanwhile is unsampled too, as under the C guard.
    let _restore = unsafe {
        let cd = sys::mp_prof_foreign_countdown();
        let saved = *cd;
        *cd = i64::MAX as u64;
        Restore(cd, saved)
    };
    f()
}
