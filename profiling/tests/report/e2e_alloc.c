/* SPDX-License-Identifier: MIT */
/* The end-to-end test's sampling allocator over mimalloc, instantiated in
 * a translation unit of its own (external definitions). */
#include <mimprof/sampling.h>
#include <mimprof/sys-mimalloc.h>

MP_PROF_SAMPLING_ALLOCATOR(e2ealloc, mp_sys_mimalloc);
