/* SPDX-License-Identifier: MIT */
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
 * This file only registers the object's code as profiler frames, and, in
 * the dormant object (MP_PRELOAD_DORMANT: libmimprof-preload-<provider>-
 * dormant.so), defines malloc and free as a jump through a pointer the
 * runtime switches (mp_preload_set_sampling, preload_runtime.h).
 */
#define _GNU_SOURCE /* dl_iterate_phdr, the glibc malloc prototypes */
/* Over mimalloc, errno on failure comes from mimalloc's error callback,
 * registered by preload_init before anything else runs here: the
 * provider's malloc and realloc then end in a tail call of mimalloc's
 * (mp_sys_mimalloc_errno_by_handler, <mimprof/sys-mimalloc.h>). */
#define MP_SYS_MIMALLOC_ERRNO_BY_HANDLER
#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

#include "preload_runtime.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(mp_preload, MP_PRELOAD_PROVIDER);

#if MP_PRELOAD_DORMANT
#define MP_OVERRIDE_NO_MALLOC_FREE
#endif
#define MP_OVERRIDE_PROVIDER mp_preload
#include <mimprof/sys-override.inc.h>

#if MP_PRELOAD_DORMANT
/* The dormant object. Until a session is asked for, malloc and free are
 * the provider's own: each is one indirect jump more than raw mimalloc
 * (callgrind: +2 instructions per malloc/free pair, against +10 for the
 * sampling allocator's fast path, whose countdown and free filter a
 * dormant process has no use for). The other
 * functions of the family always take the sampling allocator, which with
 * no session is its idle fast path; all of them end in the same provider,
 * so a block may be allocated by one path and freed by the other.
 *
 * Switching (the runtime's thread, with the session lock held): to
 * sampling before the session starts, back to raw only after it stopped,
 * when the live table and the free filter are empty again, so a raw free
 * never skips a block the profiler still tracks. The pointers are read
 * with relaxed loads: a call that read the old one finishes on the path
 * it started, which is correct either way. */
#define MP_PL_CAT2_(a, b) a##_##b
#define MP_PL_CAT_(a, b)  MP_PL_CAT2_(a, b)
#define MP_PL_RAW_(op)    MP_PL_CAT_(MP_PRELOAD_PROVIDER, op)
static void *sampled_malloc(size_t size) { return mp_preload_alloc(size, MP_SYS_NATURAL_ALIGN); }
static void sampled_free(void *p) { mp_preload_dealloc(p, 0, 0); }
#if defined(MP_SYS_HAVE_MIMALLOC) && !defined(MP_SYS_TSAN_)
/* mimalloc's own entry points: with its error callback registered they
 * are the provider's malloc and free exactly, and a dormant malloc is one
 * jump more than mimalloc's (`jmp *g_malloc(%rip)`), not two. */
#define raw_malloc mi_malloc
#define raw_free   mi_free
#else
static void *raw_malloc(size_t size) { return MP_PL_RAW_(alloc)(size, MP_SYS_NATURAL_ALIGN); }
static void raw_free(void *p) { MP_PL_RAW_(dealloc)(p, 0, 0); }
#endif

static void *(*g_malloc)(size_t) = raw_malloc;
static void (*g_free)(void *) = raw_free;

__attribute__((visibility("default"))) void *malloc(size_t size)
{
    return __atomic_load_n(&g_malloc, __ATOMIC_RELAXED)(size);
}

__attribute__((visibility("default"))) void free(void *p)
{
    __atomic_load_n(&g_free, __ATOMIC_RELAXED)(p);
}

bool mp_preload_set_sampling(bool on)
{
    __atomic_store_n(&g_malloc, on ? sampled_malloc : raw_malloc, __ATOMIC_RELEASE);
    __atomic_store_n(&g_free, on ? sampled_free : raw_free, __ATOMIC_RELEASE);
    return true;
}
#else
bool mp_preload_set_sampling(bool on)
{
    (void)on;
    return false; /* always the sampling allocator */
}
#endif

void mp_preload_trim_thread(void)
{
#ifdef MP_PRELOAD_IS_MIMALLOC
    mp_sys_mimalloc_trim_thread();
#endif
}

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
#ifdef MP_SYS_HAVE_MIMALLOC
    mp_sys_mimalloc_errno_by_handler();
#endif
    dl_iterate_phdr(register_self, (void *)(uintptr_t)&register_self);
}
