/* SPDX-License-Identifier: MIT */
/* libmimprof-internal-override-glibc.so: the members of the malloc
 * family whose glibc semantics Debian's mimalloc does not have, for the
 * override over mimalloc (override.c, which names this object first among
 * its auxiliary filtees). The same template as the override; the version
 * script override_glibc.map exports only those members, each with the
 * difference measured against raw mimalloc (allocator/tests/
 * test_override_semantics.c checks every member under both). */
#define _GNU_SOURCE
#include <mimprof/sys.h>

#define MP_OVERRIDE_PROVIDER MP_ALLOC_PROVIDER
#include <mimprof/sys-override.inc.h>
