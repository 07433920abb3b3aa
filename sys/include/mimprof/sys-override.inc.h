/* SPDX-License-Identifier: MIT */
/**
 * @file sys-override.inc.h
 * @brief Template: the malloc family over one provider, for LD_PRELOAD or
 *        for linking.
 *
 * Define `MP_OVERRIDE_PROVIDER` to a provider prefix (see <mimprof/sys.h>)
 * and include this file once, in the translation unit of a shared object:
 *
 * @code
 * #define MP_OVERRIDE_PROVIDER mp_sys_mimalloc
 * #include <mimprof/sys-override.inc.h>
 * @endcode
 *
 * It defines malloc, free, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc and malloc_usable_size with the
 * glibc semantics programs were written against (realloc(p, 0) frees p and
 * returns NULL; posix_memalign returns EINVAL for a bad alignment; errno is
 * ENOMEM on every failure). Each is a thin call into the provider's four
 * operations, which the compiler inlines: there is no function pointer and
 * no state here. Sizes the malloc family does not know (free, realloc) are
 * passed as 0, "unknown", as the provider contract allows.
 *
 * With `MP_OVERRIDE_NO_MALLOC_FREE` defined, malloc and free are left out:
 * the including object defines those two itself (mimprof's dormant
 * preload object dispatches them through a pointer it switches between
 * the raw provider and a sampling allocator).
 */
#ifndef MP_OVERRIDE_PROVIDER
#error "define MP_OVERRIDE_PROVIDER to a provider prefix before including sys-override.inc.h"
#endif

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#define MP_OVR_CAT2_(a, b) a##_##b
#define MP_OVR_CAT_(a, b)  MP_OVR_CAT2_(a, b)
#define MP_OVR_(op)        MP_OVR_CAT_(MP_OVERRIDE_PROVIDER, op)

#define MP_OVR_EXPORT __attribute__((visibility("default")))

/* The alignment malloc() hands out: the provider's natural one. */
#define MP_OVR_MALLOC_ALIGN MP_SYS_NATURAL_ALIGN

static size_t mp_ovr_page_size_(void)
{
    static size_t page; /* benign race: every thread stores the same value */
    if (page == 0)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

#ifndef MP_OVERRIDE_NO_MALLOC_FREE
/** malloc(3): `size` bytes at the provider's natural alignment. */
MP_OVR_EXPORT void *malloc(size_t size) { return MP_OVR_(alloc)(size, MP_OVR_MALLOC_ALIGN); }

/** free(3): an unsized free (the size is unknown here). */
MP_OVR_EXPORT void free(void *p) { MP_OVR_(dealloc)(p, 0, 0); }
#endif

/** calloc(3): zeroed; NULL with ENOMEM when nmemb * size overflows. */
MP_OVR_EXPORT void *calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return MP_OVR_(alloc_zeroed)(total, MP_OVR_MALLOC_ALIGN);
}

/** realloc(3) with glibc semantics: NULL p allocates; size 0 frees and returns NULL;
 *  on failure NULL with the old block intact. */
MP_OVR_EXPORT void *realloc(void *p, size_t size)
{
    if (p == NULL)
        return MP_OVR_(alloc)(size, MP_OVR_MALLOC_ALIGN);
    if (size == 0) { /* glibc: free and return NULL */
        MP_OVR_(dealloc)(p, 0, 0);
        return NULL;
    }
    return MP_OVR_(realloc)(p, 0, MP_OVR_MALLOC_ALIGN, size);
}

/** reallocarray(3): realloc of nmemb * size, NULL with ENOMEM on overflow. */
MP_OVR_EXPORT void *reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

/** posix_memalign(3): EINVAL unless align is a power of two multiple of sizeof(void *). */
MP_OVR_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (!MP_SYS_IS_POW2(align) || align % sizeof(void *) != 0)
        return EINVAL;
    void *p = MP_OVR_(alloc)(size, align);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

/** aligned_alloc(3): any power-of-two alignment, EINVAL otherwise. */
MP_OVR_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (!MP_SYS_IS_POW2(align)) {
        errno = EINVAL;
        return NULL;
    }
    return MP_OVR_(alloc)(size, align);
}

/** memalign(3): a non-power-of-two alignment is rounded up, as glibc does. */
MP_OVR_EXPORT void *memalign(size_t align, size_t size)
{
    /* glibc rounds a non-power-of-two alignment up to the next one. */
    if (!MP_SYS_IS_POW2(align)) {
        size_t a = MP_OVR_MALLOC_ALIGN;
        while (a < align && a != 0)
            a <<= 1;
        if (a == 0) {
            errno = EINVAL;
            return NULL;
        }
        align = a;
    }
    return MP_OVR_(alloc)(size, align);
}

/** valloc(3): page-aligned. */
MP_OVR_EXPORT void *valloc(size_t size) { return MP_OVR_(alloc)(size, mp_ovr_page_size_()); }

/** pvalloc(3): page-aligned, size rounded up to whole pages. */
MP_OVR_EXPORT void *pvalloc(size_t size)
{
    size_t page = mp_ovr_page_size_();
    size_t rounded = (size + page - 1) & ~(page - 1);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return MP_OVR_(alloc)(rounded ? rounded : page, page);
}

/** malloc_usable_size(3): the provider's usable size; 0 for NULL. */
MP_OVR_EXPORT size_t malloc_usable_size(void *p) { return p ? MP_OVR_(usable_size)(p) : 0; }
