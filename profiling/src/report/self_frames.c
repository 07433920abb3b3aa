/* SPDX-License-Identifier: MIT */
/* Which instruction addresses are the profiler's own (self_frames.h).
 *
 * A fixed table of address ranges, filled by mp_self_frames_init (the
 * executable segments of the object that holds the profiler's code and of
 * libunwind's object, found through the platform layer) and by mp_self_frames_register (hook
 * sections of sampling-allocator instantiations). Readers never lock or allocate.
 *
 * Addresses handed to mp_frames_skip_profiler are return addresses, as
 * the unwinder reports them: the calling instruction is at pc - 1, so a
 * frame belongs to [start, end) when start < pc <= end.
 *
 * Static linking: when the profiler's code is part of the main executable
 * (libmimprof-profiling.a linked into the program), its object is the
 * application too and cannot be cut as a whole. Then the frames before the
 * outermost hook-section frame among the first MP_SELF_SCAN_FRAMES are
 * cut: a hook is where the application enters the profiler, so everything
 * inside it is profiler (or provider) code; the application's frames start
 * after it. Nothing is ever matched by name.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "../self_frames.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "../platform/platform.h"
#include "self_frames_internal.h"

typedef struct range {
    _Atomic uintptr_t start;
    _Atomic uintptr_t end; /* 0 until published */
    _Atomic int hook;
} range;

static range g_ranges[MP_SELF_MAX_RANGES];
static _Atomic size_t g_nranges; /* slots claimed */
/* The envelope of every range ever added, [g_lo, g_hi): an address
 * outside it (most application frames: the program's own code lies
 * below the shared objects) is classified by two compares instead of a
 * pass over the table. Grows only, before its range is published. */
static _Atomic uintptr_t g_lo = UINTPTR_MAX;
static _Atomic uintptr_t g_hi;
static _Atomic uint64_t g_dropped; /* registrations that found no slot */
static _Atomic bool g_static;      /* profiler code is in the main executable */
_Atomic uint64_t mp_self_frames_version_ = 1;

/* After a change is visible: readers of the new version see it. */
static void bump_version(void)
{
    atomic_fetch_add_explicit(&mp_self_frames_version_, 1, memory_order_release);
}

static bool have_range(uintptr_t start, uintptr_t end)
{
    size_t n = atomic_load_explicit(&g_nranges, memory_order_acquire);
    if (n > MP_SELF_MAX_RANGES)
        n = MP_SELF_MAX_RANGES;
    for (size_t i = 0; i < n; i++)
        if (atomic_load_explicit(&g_ranges[i].start, memory_order_relaxed) == start &&
            atomic_load_explicit(&g_ranges[i].end, memory_order_acquire) == end)
            return true;
    return false;
}

static void add_range(uintptr_t start, uintptr_t end, int hook)
{
    if (start >= end || have_range(start, end))
        return;
    size_t i = atomic_fetch_add_explicit(&g_nranges, 1, memory_order_acq_rel);
    if (i >= MP_SELF_MAX_RANGES) {
        atomic_store_explicit(&g_nranges, MP_SELF_MAX_RANGES, memory_order_release);
        atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
        return;
    }
    uintptr_t lo = atomic_load_explicit(&g_lo, memory_order_relaxed);
    while (start < lo && !atomic_compare_exchange_weak_explicit(
                             &g_lo, &lo, start, memory_order_relaxed, memory_order_relaxed))
        ;
    uintptr_t hi = atomic_load_explicit(&g_hi, memory_order_relaxed);
    while (end > hi && !atomic_compare_exchange_weak_explicit(&g_hi, &hi, end, memory_order_relaxed,
                                                              memory_order_relaxed))
        ;
    atomic_store_explicit(&g_ranges[i].start, start, memory_order_relaxed);
    atomic_store_explicit(&g_ranges[i].hook, hook, memory_order_relaxed);
    atomic_store_explicit(&g_ranges[i].end, end, memory_order_release);
    bump_version();
}

void mp_self_frames_register(uintptr_t start, uintptr_t end) { add_range(start, end, 1); }

/* ---- discovery of whole objects ---- */

/* Adds the executable segments of the object holding `addr`; returns
 * whether that object is the main executable (then nothing is added).
 * The generic backend finds no object: only hook sections count there. */
static bool add_object_of(uintptr_t addr)
{
    uintptr_t starts[16], ends[16];
    bool is_main = false;
    size_t n = mp_plat_object_code(addr, starts, ends, 16, &is_main);
    if (n == 0)
        return false;
    if (is_main)
        return true;
    for (size_t i = 0; i < n; i++)
        add_range(starts[i], ends[i], 0);
    return false;
}

void mp_self_frames_init(void)
{
    if (add_object_of((uintptr_t)&mp_self_frames_init) &&
        !atomic_exchange_explicit(&g_static, true, memory_order_acq_rel))
        bump_version();
    /* libunwind, when it is its own object (statically linked into the
     * profiler's object it is already covered). Found by address: its
     * exported entry points, whichever this build has. */
    static const char *const unw_syms[] = {"unw_backtrace", "_ULx86_64_step", "_ULaarch64_step",
                                           "_ULppc64_step"};
    for (size_t i = 0; i < sizeof unw_syms / sizeof unw_syms[0]; i++) {
        void *p = dlsym(RTLD_DEFAULT, unw_syms[i]);
        if (p != NULL)
            (void)add_object_of((uintptr_t)p);
    }
}

/* ---- the hook-safe reader ---- */

/* -1 outside every range, else the range's hook flag. */
static int classify(uintptr_t pc, size_t n)
{
    uintptr_t at = pc - 1; /* inside the call instruction */
    if (at < atomic_load_explicit(&g_lo, memory_order_relaxed) ||
        at >= atomic_load_explicit(&g_hi, memory_order_relaxed))
        return -1;
    int r = -1;
    for (size_t i = 0; i < n; i++) {
        uintptr_t end = atomic_load_explicit(&g_ranges[i].end, memory_order_acquire);
        if (end == 0)
            continue;
        uintptr_t start = atomic_load_explicit(&g_ranges[i].start, memory_order_relaxed);
        if (at >= start && at < end) {
            if (atomic_load_explicit(&g_ranges[i].hook, memory_order_relaxed))
                return 1;
            r = 0;
        }
    }
    return r;
}

size_t mp_frames_skip_profiler(const uintptr_t *pcs, size_t n)
{
    size_t nr = atomic_load_explicit(&g_nranges, memory_order_acquire);
    if (nr > MP_SELF_MAX_RANGES)
        nr = MP_SELF_MAX_RANGES;
    if (pcs == NULL || n == 0)
        return 0;
    size_t i = 0;
    while (i < n && classify(pcs[i], nr) >= 0)
        i++;
    if (atomic_load_explicit(&g_static, memory_order_acquire)) {
        size_t lim = n < MP_SELF_SCAN_FRAMES ? n : MP_SELF_SCAN_FRAMES;
        for (size_t j = lim; j > i; j--) {
            if (classify(pcs[j - 1], nr) == 1) {
                i = j;
                while (i < n && classify(pcs[i], nr) >= 0)
                    i++;
                break;
            }
        }
    }
    return i;
}

/* ---- test views ---- */

bool mp_self_frames_static_mode(void)
{
    return atomic_load_explicit(&g_static, memory_order_acquire);
}

size_t mp_self_frames_ranges(uintptr_t *starts, uintptr_t *ends, int *hooks, size_t cap)
{
    size_t n = atomic_load_explicit(&g_nranges, memory_order_acquire);
    if (n > MP_SELF_MAX_RANGES)
        n = MP_SELF_MAX_RANGES;
    size_t k = 0;
    for (size_t i = 0; i < n && k < cap; i++) {
        uintptr_t end = atomic_load_explicit(&g_ranges[i].end, memory_order_acquire);
        if (end == 0)
            continue;
        starts[k] = atomic_load_explicit(&g_ranges[i].start, memory_order_relaxed);
        ends[k] = end;
        hooks[k] = atomic_load_explicit(&g_ranges[i].hook, memory_order_relaxed);
        k++;
    }
    return k;
}

uint64_t mp_self_frames_dropped(void)
{
    return atomic_load_explicit(&g_dropped, memory_order_relaxed);
}
