/**
 * @file sys-jemalloc.h
 * @brief The `mp_sys_jemalloc` provider: jemalloc's non-standard API
 *        behind the provider contract of <mimprof/sys.h>.
 *
 * Mapping: alloc -> mallocx, dealloc -> sdallocx (sized) or dallocx,
 * realloc -> rallocx (NULL and the block kept on failure), alloc_zeroed ->
 * mallocx with MALLOCX_ZERO, usable_size -> sallocx. jemalloc leaves a
 * request of 0 bytes undefined for mallocx/rallocx, so 0 is served as 1,
 * and a sized free of such a block passes 1 as well.
 */
#ifndef MIMPROF_SYS_JEMALLOC_H
#define MIMPROF_SYS_JEMALLOC_H

#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <mimprof/sys.h>
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

/** Allocates `size` bytes aligned to `align` (a power of two). */
static inline void *mp_sys_jemalloc_alloc(size_t size, size_t align)
{
    return mp_sys_jemalloc_enomem_(mallocx(size ? size : 1, mp_sys_jemalloc_flags_(align)));
}

/** Frees `p`, allocated with `size` (0 = unknown) and `align`. */
static inline void mp_sys_jemalloc_dealloc(void *p, size_t size, size_t align)
{
    if (p == NULL)
        return;
    MP_SYS_TSAN_RELEASE_(p);
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

#endif /* MIMPROF_SYS_JEMALLOC_H */
