/* SPDX-License-Identifier: MIT */
/* The sampling path's fast stack walk (src/unwind_fast.c) against
 * libunwind's unw_backtrace on the same stacks: frames with RSP- and
 * RBP-based rules, variable-length frames, a realigned stack, frames in
 * libc (qsort's comparator), a signal handler's frame, another thread.
 * The fast walk must give exactly unw_backtrace's frames, or decline
 * (-1); on ordinary frames it must not decline. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "unwind_fast.h"

enum { CAP = 96 };

typedef struct verdict {
    int fast; /* frames the fast walk gave, or -1 */
    int ub;   /* frames unw_backtrace gave, this function's own excluded */
    bool same;
} verdict;

/* Both walks from here: unw_backtrace's first frame is this function's
 * own return address into its call of unw_backtrace, the fast walk starts
 * at this function's caller. */
__attribute__((noinline)) static verdict compare_here(void)
{
    uintptr_t a[CAP], b[CAP + 1];
    mp_unwind_start from = MP_UNWIND_HERE();
    verdict v;
    bool changed;
    v.fast = mp_unwind_fast(&from, a, CAP, &changed);
    int m = unw_backtrace((void **)b, CAP + 1);
    v.ub = m - 1;
    v.same = v.fast == v.ub && memcmp(a, b + 1, (size_t)v.ub * sizeof a[0]) == 0;
    return v;
}

static void expect_same(verdict v, const char *what)
{
    cr_assert_gt(v.ub, 0, "%s: libunwind found no frame", what);
    cr_assert_neq(v.fast, -1, "%s: the fast walk declined an ordinary stack", what);
    cr_assert(v.same, "%s: fast %d frames, unw_backtrace %d, or different frames", what, v.fast,
              v.ub);
}

/* RSP-based frames of several sizes. */
__attribute__((noinline)) static verdict fixed(int d)
{
    volatile char pad[40 + 24 * (3 & 1)];
    pad[0] = (char)d;
    if (d == 0)
        return compare_here();
    verdict v = fixed(d - 1);
    pad[1] = pad[0];
    return v;
}

/* RBP-based frames: a variable-length array makes GCC keep a frame pointer. */
__attribute__((noinline)) static verdict vla(int d)
{
    volatile char buf[16 + 40 * (d % 5)];
    buf[0] = (char)d;
    verdict v = d == 0 ? compare_here() : (d % 2 ? vla(d - 1) : fixed(d % 3));
    buf[1] = buf[0];
    return v;
}

/* A stack realigned to 64 bytes. */
__attribute__((noinline)) static verdict aligned(int d)
{
    volatile char x[64] __attribute__((aligned(64)));
    x[0] = (char)d;
    verdict v = d == 0 ? compare_here() : aligned(d - 1);
    x[1] = x[0];
    return v;
}

/* A dynamically realigned stack (GCC's DRAP: the CFA is a DWARF
 * expression, CFA = *(RBP - 8), which the fast walk must not cache). */
__attribute__((noinline, force_align_arg_pointer)) static verdict drap(int d)
{
    volatile char x[64] __attribute__((aligned(64)));
    volatile char vl[d + 1]; /* a variable-length frame as well: GCC needs DRAP */
    x[0] = vl[0] = (char)d;
    verdict v = d == 0 ? compare_here() : drap(d - 1);
    x[1] = vl[d];
    vl[0] = x[1];
    return v;
}

/* A frame-pointer frame without a variable-length array (GCC's per-function
 * option; clang has none, and its sanitizer trees keep frame pointers
 * everywhere). */
#if defined(__clang__)
#define WITH_FRAME_POINTER
#else
#define WITH_FRAME_POINTER __attribute__((optimize("no-omit-frame-pointer")))
#endif
__attribute__((noinline)) WITH_FRAME_POINTER static verdict with_fp(int d)
{
    volatile int x = d;
    verdict v = d == 0 ? vla(3) : with_fp(d - 1);
    x++;
    return v;
}

Test(unwind_fast, same_frames_as_libunwind)
{
    for (int round = 0; round < 3; round++) { /* learning, then the learned rules */
        expect_same(fixed(0), "fixed 0");
        expect_same(fixed(7), "fixed 7");
        expect_same(vla(0), "vla 0");
        expect_same(vla(9), "vla 9");
        expect_same(with_fp(4), "frame pointers");
        verdict v = aligned(3);
        cr_log_info("realigned stack: fast %d, unw_backtrace %d", v.fast, v.ub);
        cr_assert(v.fast == -1 || v.same, "realigned: fast %d, unw_backtrace %d", v.fast, v.ub);
        v = drap(2);
        cr_log_info("DRAP-realigned stack: fast %d, unw_backtrace %d", v.fast, v.ub);
        cr_assert(v.fast == -1 || v.same, "DRAP: fast %d, unw_backtrace %d", v.fast, v.ub);
    }
}

Test(unwind_fast, deep_stack_truncated_at_cap)
{
    verdict v = fixed(CAP + 20);
    expect_same(v, "deeper than the buffer");
    cr_assert_eq(v.fast, CAP);
}

static verdict g_cmp_verdict;
static int cmp_ints(const void *x, const void *y)
{
    if (g_cmp_verdict.ub == 0)
        g_cmp_verdict = compare_here();
    return *(const int *)x - *(const int *)y;
}

Test(unwind_fast, through_libc)
{
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    memset(&g_cmp_verdict, 0, sizeof g_cmp_verdict);
    qsort(v, 64, sizeof v[0], cmp_ints);
    verdict r = g_cmp_verdict;
    cr_log_info("qsort: fast %d, unw_backtrace %d", r.fast, r.ub);
    cr_assert(r.fast == -1 || r.same, "qsort: fast %d, unw_backtrace %d", r.fast, r.ub);
}

static volatile sig_atomic_t g_in_handler;
static verdict g_sig_verdict;
static void on_signal(int sig)
{
    (void)sig;
    g_sig_verdict = compare_here();
    g_in_handler = 1;
}

Test(unwind_fast, signal_frame_declined_or_same)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
    for (int i = 0; i < 3; i++) {
        g_in_handler = 0;
        raise(SIGUSR1);
        cr_assert(g_in_handler);
        verdict v = g_sig_verdict;
        /* the fast walk cannot step the kernel's signal frame: it declines */
        cr_assert_eq(v.fast, -1, "signal frame: fast %d, unw_backtrace %d", v.fast, v.ub);
    }
    sigaction(SIGUSR1, &old, NULL);
}

static void *thread_main(void *arg)
{
    verdict *v = arg;
    *v = vla(5);
    return NULL;
}

Test(unwind_fast, other_thread)
{
    pthread_t t;
    verdict v;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pthread_create(&t, NULL, thread_main, &v), 0);
        pthread_join(t, NULL);
        expect_same(v, "thread");
    }
}

Test(unwind_fast, flush_relearns)
{
    expect_same(vla(4), "before the flush");
    mp_unwind_fast_flush();
    expect_same(vla(4), "after the flush");
}

/* The walk at every buffer size from 0 to past the stack's depth: the
 * walk takes four frames a turn while four slots are left, one a turn
 * after that, so each cap mod 4 ends in a different place; each must be
 * the full walk's prefix. */
__attribute__((noinline)) static void walk_every_cap(int *bad_cap)
{
    uintptr_t full[CAP], part[CAP];
    mp_unwind_start from = MP_UNWIND_HERE();
    bool changed;
    int n = mp_unwind_fast(&from, full, CAP, &changed);
    *bad_cap = n < 0 ? -2 : -1;
    for (int cap = 0; n >= 0 && cap <= n + 2 && cap <= CAP; cap++) {
        int m = mp_unwind_fast(&from, part, cap, &changed);
        int want = cap < n ? cap : n;
        if (m != want || memcmp(part, full, (size_t)want * sizeof full[0]) != 0) {
            *bad_cap = cap;
            return;
        }
    }
}

__attribute__((noinline)) static void caps_at(int d, int *bad_cap)
{
    volatile int x = d;
    if (d == 0)
        walk_every_cap(bad_cap);
    else
        caps_at(d - 1, bad_cap);
    x++;
}

Test(unwind_fast, every_cap_a_prefix)
{
    for (int d = 0; d < 4; d++) {
        int bad = 0;
        caps_at(d, &bad);
        cr_assert_neq(bad, -2, "depth %d: the fast walk declined", d);
        cr_assert_eq(bad, -1, "depth %d: cap %d is not the full walk's prefix", d, bad);
    }
}

/* Return addresses no stack of this process holds: 0 ends the stack (as
 * in libunwind), and addresses at or above 2^47 or negative (garbage
 * read as a return address) are never stepped by a learned rule, even
 * one whose slot and key bits they share. */
__attribute__((noinline)) static mp_unwind_start learned_start(void)
{
    uintptr_t pcs[CAP];
    mp_unwind_start from = MP_UNWIND_HERE();
    bool changed;
    cr_assert_gt(mp_unwind_fast(&from, pcs, CAP, &changed), 0); /* its rules are learned now */
    return from;
}

Test(unwind_fast, impossible_return_addresses)
{
    uintptr_t pcs[CAP];
    bool changed;
    mp_unwind_start from = learned_start();
    uintptr_t ip = from.ip;
    cr_assert_lt(ip, (uintptr_t)1 << 47);
    mp_unwind_start bad = from;
    bad.ip = 0;
    cr_assert_eq(mp_unwind_fast(&bad, pcs, CAP, &changed), 0,
                 "a zero return address ends the stack");
    const uintptr_t aliases[] = {
        ip + ((uintptr_t)1 << 47),      /* the first address the signed key overflows on */
        ip + ((uintptr_t)1 << 48),      /* the same key bits as ip once shifted by 16 */
        ip | ((uintptr_t)0xffff << 48), /* negative, above -2^47 */
        ip | ((uintptr_t)1 << 63),      /* negative, below -2^47 */
        ~(uintptr_t)0,                  /* -1 */
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        bad.ip = aliases[i];
        cr_assert_eq(mp_unwind_fast(&bad, pcs, CAP, &changed), -1, "return address %#lx: stepped",
                     (unsigned long)aliases[i]);
    }
    cr_assert_gt(mp_unwind_fast(&from, pcs, CAP, &changed), 0, "the real address still walks");
}

/* *changed: false exactly when every frame the walk returns was already
 * in its slot (the sampler then takes its last stack without comparing). */
__attribute__((noinline)) static void walk_twice(int *n, bool changed[4], uintptr_t *buf,
                                                 uintptr_t *ref)
{
    mp_unwind_start from = MP_UNWIND_HERE();
    *n = mp_unwind_fast(&from, ref, CAP, &changed[0]); /* the reference, into a buffer of its own */
    memset(buf, 0, CAP * sizeof *buf);
    (void)mp_unwind_fast(&from, buf, CAP, &changed[1]); /* a buffer of zeros */
    (void)mp_unwind_fast(&from, buf, CAP, &changed[2]); /* the same walk again */
    buf[*n / 2] ^= 16;                                  /* one frame differs */
    (void)mp_unwind_fast(&from, buf, CAP, &changed[3]);
}

Test(unwind_fast, changed_says_whether_the_buffer_held_the_stack)
{
    uintptr_t buf[CAP], ref[CAP];
    bool changed[4];
    int n;
    walk_twice(&n, changed, buf, ref);
    cr_assert_gt(n, 2);
    cr_assert(changed[1], "a buffer of zeros held no frame");
    cr_assert_not(changed[2], "the same stack in the same buffer: unchanged");
    cr_assert(changed[3], "one frame differed");
    cr_assert_arr_eq(buf, ref, (size_t)n * sizeof *buf, "the walk repairs the buffer");
}
