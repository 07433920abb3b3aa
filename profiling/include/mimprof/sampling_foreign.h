/* SPDX-License-Identifier: MIT */
/**
 * @file sampling_foreign.h
 * @brief The sampling allocator's entry points for allocators written in
 *        another language (Rust's `GlobalAlloc`: the `mimprof` crate).
 *
 * <mimprof/sampling.h> instantiates the sampling allocator in C, where the
 * fast path names the thread-local countdown `mp_prof_hook_countdown`
 * directly. A language that cannot name a C thread-local variable (stable
 * Rust) asks once per thread for its address and keeps it in a
 * thread-local of its own; everything else is the template's interface,
 * called exactly as the template calls it, so that a foreign allocator
 * enters the same recorder (one RNG draw per hit, the same estimator and
 * live table, realloc rollback, frees from any thread, the recursion
 * guard, mp_prof_thread_exclude()) and shares the thread's countdown with
 * any C instantiation in the same process:
 *
 * @code
 * alloc(size):    cd = thread's pointer, else cd = mp_prof_foreign_countdown()
 *                 if ((int64_t)(*cd -= size) < 0)
 *                     return mp_prof_hook_sample(provider_alloc(size), size);
 *                 return provider_alloc(size);
 * dealloc(p):     if (the filter of <mimprof/sampling.h> says p may be sampled)
 *                     mp_prof_hook_forget(p);
 *                 provider_dealloc(p);
 * realloc(p, n):  hit = (int64_t)(*cd -= n) < 0;
 *                 if (hit || p may be sampled) {
 *                     id = p may be sampled ? mp_prof_hook_live_id(p) : 0;
 *                     q = provider_realloc(p, n);
 *                     if (q && id) mp_prof_hook_forget_id(p, id);
 *                     return hit ? mp_prof_hook_sample(q, n) : q;
 *                 }
 *                 return provider_realloc(p, n);
 * @endcode
 *
 * The foreign code that calls mp_prof_hook_sample() should live in a
 * section named `mimprof_hooks` of its object and register that
 * section's bounds with mp_prof_hook_register(), as the template does, so
 * that captured stacks start at the application's frame.
 */
#ifndef MIMPROF_SAMPLING_FOREIGN_H
#define MIMPROF_SAMPLING_FOREIGN_H

#include <stddef.h>
#include <stdint.h>

#include <mimprof/sampling.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * The address of the calling thread's sampling countdown
 * (`mp_prof_hook_countdown`), valid in this thread until it exits and
 * only there. A foreign allocator subtracts each allocation's size from
 * it (unsigned arithmetic, the result read as signed) and takes the
 * sampling path when it goes below zero, as mp_prof_hook_consume() does.
 * Never fails; allocates nothing; async-signal-safe.
 */
MP_PROF_API uint64_t *mp_prof_foreign_countdown(void);

/**
 * `sizeof(mp_prof_hook_filter_t)` as this library was built: a foreign
 * allocator that mirrors the filter's layout (MP_PROF_HOOK_SUMMARY_BYTES
 * summary bytes, then MP_PROF_HOOK_FILTER_WORDS words) checks it against
 * its own before it trusts the filter.
 */
MP_PROF_API size_t mp_prof_foreign_filter_size(void);

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_SAMPLING_FOREIGN_H */
