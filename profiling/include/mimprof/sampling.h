/* SPDX-License-Identifier: MIT */
/**
 * @file sampling.h
 * @brief The sampling allocator: a compile-time template over a provider.
 *
 * A provider is a prefix `P` with the static inline operations of
 * <mimprof/sys.h> (`P_alloc`, `P_dealloc`, `P_realloc`, `P_alloc_zeroed`,
 * `P_usable_size`, `P_name`, `P_version`). Instantiating
 *
 * @code
 * #include <mimprof/sys.h>       // with mimprof-sys-mimalloc: mp_sys_mimalloc
 * #include <mimprof/sampling.h>
 * MP_PROF_SAMPLING_ALLOCATOR(myalloc, mp_sys_mimalloc)
 * @endcode
 *
 * defines `myalloc_alloc`, `myalloc_dealloc`, `myalloc_realloc`,
 * `myalloc_alloc_zeroed`, `myalloc_usable_size`, `myalloc_name` and
 * `myalloc_version` with the provider contract of <mimprof/sys.h>. Each calls
 * the provider's function directly (inlined; never through a function
 * pointer) and forwards exactly the pointer, size and alignment it was given.
 *
 * Cost model
 * ----------
 * - Allocation: one subtraction from a thread-local byte countdown
 *   (initial-exec TLS on ELF) and one branch. When the countdown would go below
 *   zero the allocation takes the out-of-line *sampling path*: a fresh
 *   exponential interval is drawn (one RNG draw), and if a session is
 *   running the stack is captured and the block is recorded with the
 *   weight of the unbiased estimator p = 1 - exp(-S/R).
 * - Free: a cheap filter says whether the block may be sampled: one byte
 *   per 4 KiB page (a summary indexed by the low 32 bits of the address),
 *   and only when that is set, one bit of a 32 KiB bitmap (the word
 *   chosen by the block's page, the bit by its 64-byte granule); only a
 *   positive consults the live table. Unsampled blocks never touch a lock
 *   or a table.
 * - No lock, no atomic read-modify-write and no out-of-line call on either
 *   fast path (ELF). On Mach-O a `__thread` variable is a dyld TLV: every
 *   access goes through its descriptor's thunk (tlv_get_addr), the
 *   tls_model attribute has no effect, and the first access in a thread
 *   allocates the thread's block with malloc() (dyld's
 *   tlv_allocate_and_initialize_for_key). So on macOS the provider must not
 *   be the allocator behind malloc() itself.
 *
 * Semantics
 * ---------
 * - `P_dealloc(p, 0, align)` means "size unknown" (as from free()).
 * - `P_realloc` is a free of the old block and an allocation of the new one
 *   by the normal sampling rule; on failure it returns NULL, the old block
 *   and its live-table entry stay (rollback).
 * - A sampled pointer is in the live table before the allocation returns;
 *   a free from any thread removes it.
 *
 * Two forms:
 * - MP_PROF_SAMPLING_ALLOCATOR(name, provider): external definitions, in
 *   one translation unit; other units use
 *   MP_PROF_SAMPLING_ALLOCATOR_DECLARE(name).
 * - MP_PROF_SAMPLING_ALLOCATOR_INLINE(name, provider): `static inline`
 *   definitions, so that the fast path inlines into the caller (the
 *   LD_PRELOAD objects use this form inside malloc() and free()).
 *
 * The functions are placed in the section `mimprof_hooks` (ELF; on Mach-O
 * `__TEXT,mimprof_hooks`), whose range a constructor registers with the
 * profiler, so that captured stacks start at the application's frame. The
 * instantiating object must be linked with libmimprof-profiling
 * (dependency `mimprof-profiling`) and the provider's own dependency; the
 * profiling library itself depends on no allocator.
 *
 * The declarations below prefixed `mp_prof_hook_` are the template's
 * interface to the library: they are exported for the template only and
 * are not meant to be called directly.
 */
#ifndef MIMPROF_SAMPLING_H
#define MIMPROF_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#ifdef __cplusplus
extern "C" {
#endif

/** log2 of the number of bits of the free-path filter (32 KiB). */
#define MP_PROF_HOOK_FILTER_BITS 18

/** Words (64 bits each) of the free-path filter. */
#define MP_PROF_HOOK_FILTER_WORDS (1u << (MP_PROF_HOOK_FILTER_BITS - 6))

/** Bytes of the filter's summary: one per 4 KiB page of a 4 GiB range. */
#define MP_PROF_HOOK_SUMMARY_BYTES (1u << 20)

/**
 * Per-thread byte countdown (template interface): the number of bytes this
 * thread may still allocate before the next sample point. An allocation of
 * S bytes is sampled when S exceeds it (the difference is negative). Zero in
 * a new thread, so a thread's first allocation initializes its state.
 */
extern MP_PROF_API __thread uint64_t mp_prof_hook_countdown
    __attribute__((tls_model("initial-exec")));

/**
 * The free-path filter (template interface), two levels. `summary`: byte
 * s counts (saturating at 255) the live sampled blocks on the pages whose
 * number is s modulo 2^20 (s = the low 32 bits of the address >> 12, two
 * instructions on the free path); a free is decided there (one byte
 * compare) unless its page holds a sampled block. Only bytes of the pages
 * a program frees touch the cache (one 64-byte line per 256 KiB of heap,
 * a quarter of what mimalloc's own page descriptors take), and only
 * bytes ever set take memory. `bits`: the bit of slot
 * mp_prof_hook_filter_slot(p) is set while a live sampled block maps to
 * it. Written by the library under its locks, read here with relaxed
 * atomic loads.
 */
typedef struct mp_prof_hook_filter_t {
    uint8_t summary[MP_PROF_HOOK_SUMMARY_BYTES]; /**< live sampled blocks per page (mod 2^20) */
    uint64_t bits[MP_PROF_HOOK_FILTER_WORDS];    /**< one bit per filter slot */
} mp_prof_hook_filter_t;

/** Template interface: the free-path filter (see mp_prof_hook_filter_t). */
extern MP_PROF_API mp_prof_hook_filter_t mp_prof_hook_filter;

/**
 * Template interface: the countdown went below zero on an allocation of `size`
 * bytes that returned `p` (NULL when the provider failed). Draws the next
 * interval and, when a session runs, records `p`. Never fails; returns `p`,
 * so that the template's slow path ends in a tail call and its own frame
 * is gone before the stack is captured (one frame less to unwind).
 */
MP_PROF_API void *mp_prof_hook_sample(void *p, size_t size);

/** Template interface: `p`, which passed the filter, is being freed. */
MP_PROF_API void mp_prof_hook_forget(void *p);

/**
 * Template interface: before a realloc of `p` (which passed the filter):
 * the identity of its live entry, 0 if it has none.
 */
MP_PROF_API uint64_t mp_prof_hook_live_id(const void *p);

/**
 * Template interface: after a successful realloc of `p`: removes its live
 * entry if it still is the one identified by `id` (a block reallocated
 * away may already hold a newer sample at the same address).
 */
MP_PROF_API void mp_prof_hook_forget_id(const void *p, uint64_t id);

/** Template interface: registers [start, end) as profiler code (a hook section). */
MP_PROF_API void mp_prof_hook_register(uintptr_t start, uintptr_t end);

/* The filter word of a block is its 4 KiB page number modulo the 4,096
 * words, its bit its 64-byte granule in the page: frees of neighbouring
 * blocks touch one word, and the 32 KiB filter stays in cache under heavy
 * churn. A heap is mostly contiguous address ranges, whose pages the
 * modulus spreads over the words exactly evenly (two pages share a word
 * only 16 MiB apart), so a multiplicative hash buys no fewer false
 * positives and costs the free path three instructions (BENCHMARKS.md,
 * "Free filter"). */
#define MP_PROF_HOOK_FILTER_WORD_(a) ((uint32_t)((a) >> 12) & (MP_PROF_HOOK_FILTER_WORDS - 1u))

/* The summary byte of a block: its page number modulo 2^20. Its low 12
 * bits are the block's filter word, so a summary byte and a filter word
 * belong to the same live-table stripe. */
#define MP_PROF_HOOK_SUMMARY_INDEX_(a) ((uint32_t)(a) >> 12)

/** Template interface: the filter slot (word * 64 + bit) of `p`. */
static inline uint32_t mp_prof_hook_filter_slot(const void *p)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    return MP_PROF_HOOK_FILTER_WORD_(a) << 6 | (uint32_t)((a >> 6) & 63);
}

/* Template interface: whether summary byte `s` is nonzero (a relaxed
 * atomic load). On x86-64 one compare against memory whose flags the
 * branch uses directly: the atomic load alone compiles to a load and a
 * test, one instruction more on every free. An aligned byte load is
 * atomic there, and the asm is volatile, so it is read once per call, as
 * the atomic load would be. */
static inline int mp_prof_hook_summary_set_(uint64_t s)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
    int nz;
    __asm__ volatile("cmpb $0, (%1,%2)"
                     : "=@ccnz"(nz)
                     : "r"(mp_prof_hook_filter.summary), "r"(s), "m"(mp_prof_hook_filter.summary));
    return nz;
#else
    return __atomic_load_n(&mp_prof_hook_filter.summary[s], __ATOMIC_RELAXED) != 0;
#endif
}

/** Template interface: the filter test (nonzero: `p` may be sampled). */
static inline int mp_prof_hook_maybe_sampled(const void *p)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (__builtin_expect(!mp_prof_hook_summary_set_(MP_PROF_HOOK_SUMMARY_INDEX_(a)), 1))
        return 0;
    uint64_t x =
        __atomic_load_n(&mp_prof_hook_filter.bits[MP_PROF_HOOK_FILTER_WORD_(a)], __ATOMIC_RELAXED);
    return (int)((x >> ((a >> 6) & 63)) & 1);
}

/**
 * Template interface: subtracts `size` from the countdown; nonzero when it
 * went below zero (read as signed), i.e. when `size` exceeds it. The
 * countdown never exceeds 2^62, so every size up to 2^63 is decided
 * exactly; the arithmetic is unsigned (no undefined overflow) and
 * compiles to one subtract-from-memory and one branch.
 */
static inline int mp_prof_hook_consume(size_t size)
{
    return (int64_t)(mp_prof_hook_countdown -= (uint64_t)size) < 0;
}

#if defined(__APPLE__) && defined(__MACH__)
/* Mach-O: a section is named "segment,section" (section name at most 16
 * characters) and this one lives in __TEXT. The linker defines its bounds
 * as the symbols section$start$__TEXT$mimprof_hooks and
 * section$end$__TEXT$mimprof_hooks: the asm labels give those exact names,
 * without the C underscore prefix. ld64 (SectionBoundaryAtom in
 * Resolver.cpp) and lld (handleSectionBoundarySymbol) define them with
 * linkage-unit scope, one pair per linked image, and create the section
 * when no input has it, so they are defined even for an empty section and
 * need no weak reference. */
/** Template interface: start of this object's hook section (set by the linker). */
extern const char __start_mimprof_hooks[] __asm("section$start$__TEXT$mimprof_hooks")
    __attribute__((visibility("hidden")));
/** Template interface: end of this object's hook section (set by the linker). */
extern const char __stop_mimprof_hooks[] __asm("section$end$__TEXT$mimprof_hooks")
    __attribute__((visibility("hidden")));

#define MP_PROF_HOOK_SECTION_                                                                      \
    __attribute__((section("__TEXT,mimprof_hooks,regular,pure_instructions")))
#else
/** Template interface: start of this object's hook section (set by the linker). */
extern const char __start_mimprof_hooks[] __attribute__((weak, visibility("hidden")));
/** Template interface: end of this object's hook section (set by the linker). */
extern const char __stop_mimprof_hooks[] __attribute__((weak, visibility("hidden")));

#define MP_PROF_HOOK_SECTION_ __attribute__((section("mimprof_hooks")))
#endif
#define MP_PROF_CAT2_(a, b) a##_##b
#define MP_PROF_CAT_(a, b)  MP_PROF_CAT2_(a, b)

/** Prototypes of an allocator defined with MP_PROF_SAMPLING_ALLOCATOR(name, ...). */
#define MP_PROF_SAMPLING_ALLOCATOR_DECLARE(nm_)                                                    \
    void *MP_PROF_CAT_(nm_, alloc)(size_t size, size_t align);                                     \
    void MP_PROF_CAT_(nm_, dealloc)(void *p, size_t size, size_t align);                           \
    void *MP_PROF_CAT_(nm_, realloc)(void *p, size_t old_size, size_t align, size_t new_size);     \
    void *MP_PROF_CAT_(nm_, alloc_zeroed)(size_t size, size_t align);                              \
    size_t MP_PROF_CAT_(nm_, usable_size)(const void *p);                                          \
    const char *MP_PROF_CAT_(nm_, name)(void);                                                     \
    const char *MP_PROF_CAT_(nm_, version)(char *buf)

/* The body shared by both forms; `storage` is empty or `static inline`. */
#define MP_PROF_SAMPLING_ALLOCATOR_BODY_(nm_, prov_, storage_)                                     \
    __attribute__((noinline)) MP_PROF_HOOK_SECTION_ static void *MP_PROF_CAT_(nm_, alloc_slow_)(   \
        size_t size, size_t align, int zeroed)                                                     \
    {                                                                                              \
        void *p_ = zeroed ? MP_PROF_CAT_(prov_, alloc_zeroed)(size, align)                         \
                          : MP_PROF_CAT_(prov_, alloc)(size, align);                               \
        return mp_prof_hook_sample(p_, size);                                                      \
    }                                                                                              \
    __attribute__((noinline)) MP_PROF_HOOK_SECTION_ static void *MP_PROF_CAT_(nm_, realloc_slow_)( \
        void *p, size_t old_size, size_t align, size_t new_size, int hit)                          \
    {                                                                                              \
        uint64_t id_ = mp_prof_hook_maybe_sampled(p) ? mp_prof_hook_live_id(p) : 0;                \
        void *q_ = MP_PROF_CAT_(prov_, realloc)(p, old_size, align, new_size);                     \
        if (q_ != NULL && id_ != 0)                                                                \
            mp_prof_hook_forget_id(p, id_);                                                        \
        if (hit)                                                                                   \
            return mp_prof_hook_sample(q_, new_size);                                              \
        return q_;                                                                                 \
    }                                                                                              \
    __attribute__((constructor)) static void MP_PROF_CAT_(nm_, register_hooks_)(void)              \
    {                                                                                              \
        mp_prof_hook_register((uintptr_t)__start_mimprof_hooks, (uintptr_t)__stop_mimprof_hooks);  \
    }                                                                                              \
    MP_PROF_HOOK_SECTION_ storage_ void *MP_PROF_CAT_(nm_, alloc)(size_t size, size_t align)       \
    {                                                                                              \
        if (__builtin_expect(mp_prof_hook_consume(size), 0))                                       \
            return MP_PROF_CAT_(nm_, alloc_slow_)(size, align, 0);                                 \
        return MP_PROF_CAT_(prov_, alloc)(size, align);                                            \
    }                                                                                              \
    MP_PROF_HOOK_SECTION_ storage_ void *MP_PROF_CAT_(nm_, alloc_zeroed)(size_t size,              \
                                                                         size_t align)             \
    {                                                                                              \
        if (__builtin_expect(mp_prof_hook_consume(size), 0))                                       \
            return MP_PROF_CAT_(nm_, alloc_slow_)(size, align, 1);                                 \
        return MP_PROF_CAT_(prov_, alloc_zeroed)(size, align);                                     \
    }                                                                                              \
    MP_PROF_HOOK_SECTION_ storage_ void MP_PROF_CAT_(nm_, dealloc)(void *p, size_t size,           \
                                                                   size_t align)                   \
    {                                                                                              \
        if (__builtin_expect(mp_prof_hook_maybe_sampled(p), 0))                                    \
            mp_prof_hook_forget(p);                                                                \
        MP_PROF_CAT_(prov_, dealloc)(p, size, align);                                              \
    }                                                                                              \
    MP_PROF_HOOK_SECTION_ storage_ void *MP_PROF_CAT_(nm_, realloc)(void *p, size_t old_size,      \
                                                                    size_t align, size_t new_size) \
    {                                                                                              \
        int hit_ = mp_prof_hook_consume(new_size);                                                 \
        if (__builtin_expect(hit_ | mp_prof_hook_maybe_sampled(p), 0))                             \
            return MP_PROF_CAT_(nm_, realloc_slow_)(p, old_size, align, new_size, hit_);           \
        return MP_PROF_CAT_(prov_, realloc)(p, old_size, align, new_size);                         \
    }                                                                                              \
    storage_ size_t MP_PROF_CAT_(nm_, usable_size)(const void *p)                                  \
    {                                                                                              \
        return MP_PROF_CAT_(prov_, usable_size)(p);                                                \
    }                                                                                              \
    storage_ const char *MP_PROF_CAT_(nm_, name)(void) { return MP_PROF_CAT_(prov_, name)(); }     \
    storage_ const char *MP_PROF_CAT_(nm_, version)(char *buf)                                     \
    {                                                                                              \
        return MP_PROF_CAT_(prov_, version)(buf);                                                  \
    }                                                                                              \
    struct MP_PROF_CAT_(nm_, sampling_allocator_unused_)

/**
 * Defines the sampling allocator `name` over `provider` with external
 * linkage (use in exactly one translation unit; declare it elsewhere with
 * MP_PROF_SAMPLING_ALLOCATOR_DECLARE). Follow it with a semicolon.
 */
#define MP_PROF_SAMPLING_ALLOCATOR(nm_, prov_)                                                     \
    MP_PROF_SAMPLING_ALLOCATOR_DECLARE(nm_);                                                       \
    MP_PROF_SAMPLING_ALLOCATOR_BODY_(nm_, prov_, )

/**
 * Defines the sampling allocator `name` over `provider` as `static inline`
 * functions of this translation unit, so that the fast paths inline into
 * their callers. Follow it with a semicolon.
 */
#define MP_PROF_SAMPLING_ALLOCATOR_INLINE(nm_, prov_)                                              \
    MP_PROF_SAMPLING_ALLOCATOR_BODY_(nm_, prov_, __attribute__((unused)) static inline)

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_SAMPLING_H */
