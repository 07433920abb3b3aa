/* SPDX-License-Identifier: MIT */
/* The generic backend of the platform layer (platform.h): any POSIX
 * system, and what `-Dplatform=generic` builds on Linux to exercise the
 * non-ELF paths.
 *
 * No loader enumeration: reports carry no mappings (every location is an
 * unmapped address), there are no build-ids, heap images are unsupported
 * (their frames are named by build-id, path and offset), and only the hook
 * sections registered by the sampling allocators are cut from stacks (the
 * profiler's own frames during a capture are all in its hook section).
 *
 * Function names come from dladdr() only where the C library documents that
 * dli_sname is a symbol whose definition contains the address (glibc: "the
 * symbol whose definition overlaps addr", matched against the symbol's
 * size). Elsewhere dladdr() may answer the nearest preceding exported
 * symbol, which would name the wrong function: no names there. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "platform.h"

#include <dlfcn.h>

static const mp_plat_caps caps = {
    .name = "generic",
    .mappings = false,
    .build_ids = false,
    .elf_files = false,
    .heap_images = false,
    .whole_objects = false,
};

const mp_plat_caps *mp_plat_caps_get(void) { return &caps; }

bool mp_plat_loader_counters(unsigned long long *adds, unsigned long long *subs)
{
    *adds = *subs = 0;
    return false;
}

bool mp_plat_scan_objects(struct mp_obj ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return true;
}

size_t mp_plat_object_code(uintptr_t addr, uintptr_t *starts, uintptr_t *ends, size_t cap,
                           bool *is_main)
{
    (void)addr;
    (void)starts;
    (void)ends;
    (void)cap;
    *is_main = false;
    return 0;
}

const char *mp_plat_function_name(uintptr_t addr)
{
#if defined(__GLIBC__)
    Dl_info info;
    if (dladdr((void *)addr, &info) == 0 || info.dli_sname == NULL || info.dli_saddr == NULL ||
        (uintptr_t)info.dli_saddr > addr)
        return NULL;
    return info.dli_sname;
#else
    (void)addr;
    return NULL;
#endif
}
