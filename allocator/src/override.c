/* SPDX-License-Identifier: MIT */
/* libmimprof-allocator-override.so: the malloc family over the configured
 * provider, from the template in mimprof-sys.
 *
 * Over mimalloc (Debian's libmimalloc.so.2, built as a malloc override
 * itself) this object is a filter (DT_FILTER and DT_AUXILIARY, see
 * meson.build): the dynamic linker puts its filtees before it in the
 * search order, first libmimprof-internal-override-glibc.so (the family
 * members whose glibc semantics mimalloc lacks, override_glibc.c), then
 * mimalloc, so that a program's malloc, free, posix_memalign and
 * malloc_usable_size are mimalloc's own entry points, at mimalloc's own
 * cost (no wrapper frame, no extra jump), and the rest is the template's.
 * The definitions here are what a program links against (its references
 * bind to this object at link time; at run time the filtees answer
 * them); without the first filtee the object does not load.
 *
 * The contract's errno (ENOMEM on every failure) comes from mimalloc's
 * error callback, registered before the program's own constructors:
 * mimalloc's malloc and calloc set no errno of their own. */
#define _GNU_SOURCE /* sysconf, and the glibc prototypes of the family */
#include <mimprof/sys.h>

#define MP_OVERRIDE_PROVIDER MP_ALLOC_PROVIDER
#include <mimprof/sys-override.inc.h>

#ifdef MP_SYS_HAVE_MIMALLOC
/* Priority 101: before constructors of default priority, in this object
 * and, since a dependency's run first, in the program. */
__attribute__((constructor(101))) static void override_errno_init(void)
{
    mp_sys_mimalloc_errno_by_handler();
}
#endif
