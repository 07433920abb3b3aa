/* SPDX-License-Identifier: MIT */
/**
 * @file allocator.h
 * @brief mimprof-allocator: the allocator a program links (or LD_PRELOADs)
 *        to run on mimalloc, with nothing of the profiler in its graph.
 *
 * The provider behind these functions is chosen when the package is
 * configured (`-Dprovider=mimalloc|jemalloc`, default mimalloc) and is
 * reported by mp_alloc_provider_name(). The functions follow the provider
 * contract of <mimprof/sys.h>: `align` is any power of two; sizes passed to
 * mp_alloc_dealloc() and mp_alloc_realloc() may be 0 for "unknown";
 * failures return NULL with errno ENOMEM and leave existing blocks intact.
 *
 * The second output of the package, `libmimprof-allocator-override.so`,
 * defines the malloc family (malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * malloc_usable_size) over the same provider, for `LD_PRELOAD` or linking.
 */
#ifndef MIMPROF_ALLOCATOR_H
#define MIMPROF_ALLOCATOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Allocates `size` bytes aligned to `align`; NULL (errno ENOMEM) on failure. */
void *mp_alloc_alloc(size_t size, size_t align);

/** Frees `p` (NULL is a no-op); `size` is its allocated size or 0 if unknown. */
void mp_alloc_dealloc(void *p, size_t size, size_t align);

/** Resizes `p` to `new_size`; on failure NULL (errno ENOMEM) and `p` intact. */
void *mp_alloc_realloc(void *p, size_t old_size, size_t align, size_t new_size);

/** Allocates `size` zero-filled bytes aligned to `align`. */
void *mp_alloc_alloc_zeroed(size_t size, size_t align);

/** Bytes usable at `p` (at least the requested size); 0 for NULL. */
size_t mp_alloc_usable_size(const void *p);

/** "mimalloc" or "jemalloc": the provider this build was configured with. */
const char *mp_alloc_provider_name(void);

/** The version of the mimprof-allocator package, e.g. "0.1.0". */
const char *mp_alloc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MIMPROF_ALLOCATOR_H */
