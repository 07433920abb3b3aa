/* SPDX-License-Identifier: MIT */
/**
 * @file sys.h
 * @brief mimprof-sys: native allocator bindings as uniform, statically
 *        dispatched providers.
 *
 * A *provider* is a C identifier prefix `P` for which these five
 * `static inline` operations exist:
 *
 * | function | contract |
 * |---|---|
 * | `void *P_alloc(size_t size, size_t align)` | a block of at least `size` bytes aligned to `align` (any power of two); NULL with `errno == ENOMEM` on failure. `size` may be 0 (a unique, freeable pointer). |
 * | `void P_dealloc(void *p, size_t size, size_t align)` | frees `p` (NULL is a no-op). `size` and `align` are the values it was allocated with; `size == 0` means "unknown" and does an unsized free. |
 * | `void *P_realloc(void *p, size_t old_size, size_t align, size_t new_size)` | moves or resizes `p`, keeping `min(old, new)` bytes. On failure returns NULL with `errno == ENOMEM` and leaves `p` allocated and intact. |
 * | `void *P_alloc_zeroed(size_t size, size_t align)` | like `P_alloc`, the block zero-filled. |
 * | `size_t P_usable_size(const void *p)` | bytes usable at `p` (>= the requested size); 0 for NULL. |
 *
 * plus `const char *P_name(void)` and `const char *P_version(char buf[MP_SYS_VERSION_LEN])`
 * (the linked allocator's own version, e.g. "2.0.9"), and, optionally, the statistics hook
 * `bool P_stats(mp_sys_stats *out)` (the allocator's own view of its memory, see
 * mp_sys_stats; both providers here define it; a consumer that uses it names it, so a
 * provider without it still meets the contract). Because every operation is a static inline
 * function named by the prefix, a wrapper instantiated over a provider (the
 * profiling package's sampling allocator) calls the provider directly, never
 * through a function pointer.
 *
 * A program chooses a provider by the dependency it takes, and links only
 * that allocator (Debian's mimalloc and jemalloc both replace malloc when
 * linked, so linking both would make the process allocator an accident of
 * link order):
 *
 * | provider | Meson / pkg-config dependency | header |
 * |---|---|---|
 * | `mp_sys_mimalloc` | `mimprof-sys-mimalloc` | <mimprof/sys-mimalloc.h> |
 * | `mp_sys_jemalloc` | `mimprof-sys-jemalloc` | <mimprof/sys-jemalloc.h> |
 *
 * Each dependency defines `MP_SYS_HAVE_MIMALLOC` / `MP_SYS_HAVE_JEMALLOC`,
 * which makes this header include the provider's header. The plain
 * `mimprof-sys` dependency gives the contract and the package version only.
 */
#ifndef MIMPROF_SYS_H
#define MIMPROF_SYS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Alignment every provider gives without being asked: one pointer.
 *  Requests at or below it take the allocator's plain (fastest) path. */
#define MP_SYS_NATURAL_ALIGN (sizeof(void *))

/** Size of the buffer `P_version()` writes into. */
#define MP_SYS_VERSION_LEN 64

/* ThreadSanitizer does not see the native allocators' own synchronization
 * (they are not instrumented), so a block freed on one thread and handed
 * out again on another looks like a data race. Providers announce the
 * hand-over: release at free, acquire at allocation, on the block's
 * address, which is what TSan's own malloc interceptors do. No code in
 * other builds. */
#if defined(__SANITIZE_THREAD__)
#define MP_SYS_TSAN_ 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MP_SYS_TSAN_ 1
#endif
#endif
#ifdef MP_SYS_TSAN_
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define MP_SYS_TSAN_ACQUIRE_(p) ((p) ? __tsan_acquire((void *)(p)) : (void)0)
#define MP_SYS_TSAN_RELEASE_(p) ((p) ? __tsan_release((void *)(p)) : (void)0)
#else
#define MP_SYS_TSAN_ACQUIRE_(p) ((void)0)
#define MP_SYS_TSAN_RELEASE_(p) ((void)0)
#endif

/** A figure of mp_sys_stats the allocator does not give. */
#define MP_SYS_STAT_NONE ((unsigned long long)-1)

/**
 * The allocator's own view of its memory, in bytes, as `P_stats()` fills it
 * (the optional statistics hook of the provider contract); a figure the
 * allocator does not give is MP_SYS_STAT_NONE. Names follow jemalloc's
 * `stats.*` (see its manual); mimalloc gives `committed` (exact) and
 * `reserved` (from its printed statistics, rounded to three significant
 * digits); it keeps no resident figure.
 */
typedef struct mp_sys_stats {
    unsigned long long allocated; /**< bytes in blocks the program holds (jemalloc) */
    unsigned long long active;    /**< bytes in pages that hold such blocks (jemalloc) */
    unsigned long long
        resident;              /**< bytes of the allocator's memory that are resident (jemalloc) */
    unsigned long long mapped; /**< bytes the allocator has mapped (jemalloc) */
    unsigned long long committed; /**< bytes the allocator has committed (mimalloc) */
    unsigned long long reserved;  /**< bytes of address space reserved (mimalloc, rounded) */
} mp_sys_stats;

/** Sets every figure of `s` to MP_SYS_STAT_NONE. */
static inline void mp_sys_stats_init(mp_sys_stats *s)
{
    s->allocated = s->active = s->resident = s->mapped = s->committed = s->reserved =
        MP_SYS_STAT_NONE;
}

/** True when `a` is a power of two (the only alignments a provider takes). */
#define MP_SYS_IS_POW2(a) ((a) != 0 && ((a) & ((a)-1)) == 0)

/** The version of the mimprof-sys package, e.g. "0.1.0". */
const char *mp_sys_version(void);

/**
 * Provider interface, not for direct use: finds the function `name` as
 * defined by the loaded object that contains the address `anchor` itself
 * (not by whichever object the program's symbol lookup would pick) and
 * copies its address, a function pointer of `size` bytes, to `out`.
 * @return 1 on success; 0, `out` untouched, when that object defines no
 *         `name` of its own.
 */
int mp_sys_resolve_in_object_(const void *anchor, const char *name, void *out, size_t size);

#ifdef __cplusplus
}
#endif

#ifdef MP_SYS_HAVE_MIMALLOC
#include <mimprof/sys-mimalloc.h>
#endif
#ifdef MP_SYS_HAVE_JEMALLOC
#include <mimprof/sys-jemalloc.h>
#endif

#endif /* MIMPROF_SYS_H */
