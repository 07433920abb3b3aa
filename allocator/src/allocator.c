/* SPDX-License-Identifier: MIT */
/* libmimprof-allocator: the four operations over the provider chosen at
 * configure time (MP_ALLOC_PROVIDER, e.g. mp_sys_mimalloc). Each function
 * is one inlined provider call. */
#include <mimprof/allocator.h>
#include <mimprof/sys.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b)  CAT2(a, b)
#define P(op)      CAT(MP_ALLOC_PROVIDER, op)

void *mp_alloc_alloc(size_t size, size_t align) { return P(alloc)(size, align); }

void mp_alloc_dealloc(void *p, size_t size, size_t align) { P(dealloc)(p, size, align); }

void *mp_alloc_realloc(void *p, size_t old_size, size_t align, size_t new_size)
{
    return P(realloc)(p, old_size, align, new_size);
}

void *mp_alloc_alloc_zeroed(size_t size, size_t align) { return P(alloc_zeroed)(size, align); }

size_t mp_alloc_usable_size(const void *p) { return P(usable_size)(p); }

const char *mp_alloc_provider_name(void) { return P(name)(); }

const char *mp_alloc_version(void) { return MP_ALLOC_PACKAGE_VERSION; }
