/* SPDX-License-Identifier: MIT */
/* Internal: the sampling path's stack walk, a fast path in front of
 * libunwind (unwind_fast.c). */
#ifndef MIMPROF_PROFILING_UNWIND_FAST_H
#define MIMPROF_PROFILING_UNWIND_FAST_H

#include <stdbool.h>
#include <stdint.h>

/* The frame a walk starts from: the state of the caller of the function
 * that takes it, at the instant of the call's return (MP_UNWIND_HERE). */
typedef struct mp_unwind_start {
    uintptr_t ip; /* the return address into the caller */
    uintptr_t sp; /* the caller's stack pointer after the return (the CFA) */
    uintptr_t bp; /* the caller's frame-pointer register */
} mp_unwind_start;

/* The start state of the calling function's caller. Forces a frame
 * pointer in the function that uses it (GCC and clang set one up for
 * __builtin_frame_address(0)): [fp] holds the caller's rbp, [fp + 8] the
 * return address. */
#define MP_UNWIND_HERE()                                                                           \
    ((mp_unwind_start){(uintptr_t)__builtin_return_address(0),                                     \
                       (uintptr_t)__builtin_frame_address(0) + 16,                                 \
                       *(const uintptr_t *)__builtin_frame_address(0)})

/* Writes the return addresses of the stack that starts at `from` (from->ip
 * first) to pcs[0..cap) and returns how many, exactly what libunwind's
 * unw_backtrace gives from that frame; or -1 when a frame on the way has
 * a rule this walk does not handle (the caller then asks libunwind).
 * *changed: false when each of the n frames returned was already the value
 * in its slot of pcs (a stack the caller can know as its last one without
 * comparing it again), true otherwise (always true with -1).
 * x86-64 Linux with libunwind only: elsewhere always -1. Hook safe: no
 * lock waited for, no allocation; a return address seen for the first
 * time costs three libunwind steps of a synthetic frame (learning its
 * rule), every later one a table load and two memory reads. */
int mp_unwind_fast(const mp_unwind_start *from, uintptr_t *pcs, int cap, bool *changed);

/* Forgets every learned rule (session start; tests). */
void mp_unwind_fast_flush(void);

/* pthread_atfork child handler's part (session.c). */
void mp_unwind_fast_fork_child(void);

#endif
