/* SPDX-License-Identifier: MIT */
/* libmimprof-allocator-override.so: the malloc family over the configured
 * provider, from the template in mimprof-sys. */
#define _GNU_SOURCE /* sysconf, and the glibc prototypes of the family */
#include <mimprof/sys.h>

#define MP_OVERRIDE_PROVIDER MP_ALLOC_PROVIDER
#include <mimprof/sys-override.inc.h>
