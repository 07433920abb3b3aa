/* libmimprof-preload-<provider>.so: the malloc family over the sampling
 * allocator over one provider (MP_PRELOAD_PROVIDER, e.g. mp_sys_mimalloc),
 * for LD_PRELOAD. The session is the preload runtime's
 * (runtime/preload_runtime.h), compiled into the same object: with no
 * period set (no MIMPROF_EVERY, no PYROSCOPE_SERVER_ADDRESS) it is the
 * bare preload, one report at exit:
 *
 *   LD_PRELOAD=libmimprof-preload-mimalloc.so MIMPROF_INTERVAL=64k \
 *       MIMPROF_OUTPUT=/tmp/prof/ ./program
 *
 * Every variable, its default and its meaning: runtime/rt_env.c (the
 * table cli/README.md documents). The bare preload's report is
 * uncompressed pprof (unless its name ends in .gz) named mimprof.%p.pb,
 * in the working directory or in the directory MIMPROF_OUTPUT names. It
 * holds the allocations of the whole run (alloc_*) and what was still
 * live at exit (inuse_*, i.e. leaks and memory freed only at exit).
 *
 * This file only registers the object's code as profiler frames.
 */
#define _GNU_SOURCE /* dl_iterate_phdr, the glibc malloc prototypes */
#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(mp_preload, MP_PRELOAD_PROVIDER);

#define MP_OVERRIDE_PROVIDER mp_preload
#include <mimprof/sys-override.inc.h>

/* The whole object is allocator and profiler code: its executable
 * segments are registered as such, so that malloc() and free() themselves
 * never appear as the application's innermost frame. */
static int register_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t me = (uintptr_t)data;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz)
            mine = true;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            mp_prof_hook_register(lo, lo + ph->p_memsz);
        }
    }
    return 1;
}

/* Before the runtime's constructor (priority 102), so that the first
 * report already knows these frames. */
__attribute__((constructor(101))) static void preload_init(void)
{
    dl_iterate_phdr(register_self, (void *)(uintptr_t)&register_self);
}
