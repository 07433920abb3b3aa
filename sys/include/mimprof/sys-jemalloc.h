/* SPDX-License-Identifier: MIT */
/**
 * @file sys-jemalloc.h
 * @brief The `mp_sys_jemalloc` provider: jemalloc's non-standard API
 *        behind the provider contract of <mimprof/sys.h>.
 *
 * Mapping: alloc -> jemalloc's own `malloc` at the natural alignment, else
 * mallocx; dealloc -> jemalloc's own `free` (size unknown, natural
 * alignment), sdallocx (sized) or dallocx; realloc -> rallocx (NULL and the
 * block kept on failure), alloc_zeroed -> mallocx with MALLOCX_ZERO,
 * usable_size -> sallocx. jemalloc leaves a request of 0 bytes undefined
 * for mallocx/rallocx, so 0 is served as 1 there (its malloc serves 0
 * itself), and a sized free of such a block passes 1 as well.
 *
 * Why jemalloc's `malloc` and `free`: they are its fast paths (about 34 and
 * 39 instructions), mallocx and dallocx its slow ones (94 and 90); sdallocx
 * with no flags takes the same fast path as free. A program's `malloc` may
 * be someone else's (an LD_PRELOAD object built over this provider defines
 * malloc itself), so jemalloc's are found once per translation unit, by a
 * constructor, in the object that defines mallocx
 * (mp_sys_resolve_in_object_); until then, or where that fails (a jemalloc
 * built with a symbol prefix has no `malloc` of its own), mallocx and
 * dallocx serve. jemalloc's malloc sets errno to ENOMEM on failure itself.
 */
#ifndef MIMPROF_SYS_JEMALLOC_H
#define MIMPROF_SYS_JEMALLOC_H

#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <mimprof/sys.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/** "jemalloc". */
static inline const char *mp_sys_jemalloc_name(void) { return "jemalloc"; }

/** The linked jemalloc's version ("5.3.0-0-g..."), written into `buf`. */
static inline const char *mp_sys_jemalloc_version(char buf[MP_SYS_VERSION_LEN])
{
    const char *v = NULL;
    size_t len = sizeof v;
    if (mallctl("version", (void *)&v, &len, NULL, 0) != 0 || v == NULL)
        v = JEMALLOC_VERSION;
    strncpy(buf, v, MP_SYS_VERSION_LEN - 1);
    buf[MP_SYS_VERSION_LEN - 1] = '\0';
    return buf;
}

/* Flags for an alignment: none for the natural one, else MALLOCX_ALIGN. */
static inline int mp_sys_jemalloc_flags_(size_t align)
{
    return align <= MP_SYS_NATURAL_ALIGN ? 0 : MALLOCX_ALIGN(align);
}

static inline void *mp_sys_jemalloc_enomem_(void *p)
{
    if (__builtin_expect(p == NULL, 0))
        errno = ENOMEM;
    MP_SYS_TSAN_ACQUIRE_(p);
    return p;
}

/* Until jemalloc's own malloc and free are found: the slow entry points. */
static void *mp_sys_jemalloc_mallocx_(size_t size)
{
    return mp_sys_jemalloc_enomem_(mallocx(size ? size : 1, 0));
}

static void mp_sys_jemalloc_dallocx_(void *p)
{
    if (p != NULL)
        dallocx(p, 0);
}

/* jemalloc's own malloc and free once the constructor below found them
 * (see the file comment). Never NULL, so that a call is one indirect jump. */
static struct {
    void *(*malloc)(size_t);
    void (*free)(void *);
} mp_sys_jemalloc_fast_ = {mp_sys_jemalloc_mallocx_, mp_sys_jemalloc_dallocx_};

__attribute__((constructor)) static void mp_sys_jemalloc_resolve_(void)
{
    void *(*anchor)(size_t, int) = mallocx;
    void *a;
    memcpy(&a, &anchor, sizeof a);
    void *(*m)(size_t) = NULL;
    void (*f)(void *) = NULL;
    /* Both or neither: a block from one must be freeable by the other. */
    if (mp_sys_resolve_in_object_(a, "malloc", &m, sizeof m) &&
        mp_sys_resolve_in_object_(a, "free", &f, sizeof f)) {
        __atomic_store_n(&mp_sys_jemalloc_fast_.free, f, __ATOMIC_RELAXED);
        __atomic_store_n(&mp_sys_jemalloc_fast_.malloc, m, __ATOMIC_RELAXED);
    }
}

/** Allocates `size` bytes aligned to `align` (a power of two). */
static inline void *mp_sys_jemalloc_alloc(size_t size, size_t align)
{
    if (__builtin_expect(align <= MP_SYS_NATURAL_ALIGN, 1)) {
        /* A tail call: errno and size 0 are jemalloc's. */
        void *p = __atomic_load_n(&mp_sys_jemalloc_fast_.malloc, __ATOMIC_RELAXED)(size);
        MP_SYS_TSAN_ACQUIRE_(p);
        return p;
    }
    return mp_sys_jemalloc_enomem_(mallocx(size ? size : 1, mp_sys_jemalloc_flags_(align)));
}

/** Frees `p`, allocated with `size` (0 = unknown) and `align`. */
static inline void mp_sys_jemalloc_dealloc(void *p, size_t size, size_t align)
{
    MP_SYS_TSAN_RELEASE_(p);
    if (align <= MP_SYS_NATURAL_ALIGN) {
        if (__builtin_expect(size == 0, 1)) {
            /* free(NULL) is a no-op there too */
            __atomic_load_n(&mp_sys_jemalloc_fast_.free, __ATOMIC_RELAXED)(p);
            return;
        }
        if (p != NULL) {
            sdallocx(p, size, 0); /* no flags: free's fast path */
            return;
        }
    }
    if (p == NULL)
        return;
    if (size == 0)
        dallocx(p, mp_sys_jemalloc_flags_(align));
    else
        sdallocx(p, size, mp_sys_jemalloc_flags_(align));
}

/** Resizes `p`; NULL on failure with `p` intact. */
static inline void *mp_sys_jemalloc_realloc(void *p, size_t old_size, size_t align, size_t new_size)
{
    (void)old_size;
    if (p == NULL)
        return mp_sys_jemalloc_alloc(new_size, align);
    MP_SYS_TSAN_RELEASE_(p);
    return mp_sys_jemalloc_enomem_(
        rallocx(p, new_size ? new_size : 1, mp_sys_jemalloc_flags_(align)));
}

/** Allocates `size` zeroed bytes aligned to `align`. */
static inline void *mp_sys_jemalloc_alloc_zeroed(size_t size, size_t align)
{
    return mp_sys_jemalloc_enomem_(
        mallocx(size ? size : 1, mp_sys_jemalloc_flags_(align) | MALLOCX_ZERO));
}

/** Usable bytes at `p`. */
static inline size_t mp_sys_jemalloc_usable_size(const void *p)
{
    return p ? sallocx((void *)p, 0) : 0;
}

/**
 * The statistics hook (mp_sys_stats): jemalloc's `stats.allocated`,
 * `stats.active`, `stats.resident` and `stats.mapped` through mallctl,
 * after advancing `epoch` (jemalloc caches its statistics until then).
 * False, every figure MP_SYS_STAT_NONE, when jemalloc was built without
 * statistics (--disable-stats) or the epoch cannot be advanced.
 */
static inline bool mp_sys_jemalloc_stats(mp_sys_stats *out)
{
    static const char *const names[4] = {"stats.allocated", "stats.active", "stats.resident",
                                         "stats.mapped"};
    unsigned long long *dst[4] = {&out->allocated, &out->active, &out->resident, &out->mapped};
    uint64_t epoch = 1;
    size_t elen = sizeof epoch;
    mp_sys_stats_init(out);
    if (mallctl("epoch", (void *)&epoch, &elen, (void *)&epoch, sizeof epoch) != 0)
        return false;
    bool any = false;
    for (int i = 0; i < 4; i++) {
        size_t v, len = sizeof v;
        if (mallctl(names[i], (void *)&v, &len, NULL, 0) == 0) {
            *dst[i] = v;
            any = true;
        }
    }
    return any;
}

#endif /* MIMPROF_SYS_JEMALLOC_H */
