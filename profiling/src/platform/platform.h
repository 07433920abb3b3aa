/* SPDX-License-Identifier: MIT */
/* Internal: the platform layer. Everything that depends on the object
 * format or on the dynamic loader is here, behind these functions; one
 * backend is compiled in, chosen at build time (Meson option `platform`,
 * profiling/meson_options.txt), and named by MP_PLATFORM_NAME:
 *
 *   elf.c      Linux, FreeBSD: dl_iterate_phdr (one mapping per executable
 *              PT_LOAD), GNU build-id notes, /proc/self/exe; symbols are
 *              read from the ELF files (symbols.c, elf_reader.c).
 *   darwin.c   macOS: dyld's image list (_dyld_image_count,
 *              _dyld_get_image_header, _dyld_get_image_vmaddr_slide,
 *              _dyld_get_image_name), one mapping per executable
 *              LC_SEGMENT_64, LC_UUID as the build-id; function names from
 *              dladdr(), kept only when LC_FUNCTION_STARTS confirms that
 *              the symbol is the function containing the address.
 *   generic.c  any POSIX system: no loader enumeration (reports carry no
 *              mappings), function names from dladdr() where the C library
 *              documents that it matches the containing symbol (glibc),
 *              else none.
 *
 * Not here: stack capture (unwind_fast.c's cached walk on x86-64 Linux,
 * sampler.c: libunwind's unw_backtrace with the ELF backend when built
 * with it, else execinfo's backtrace(), which glibc and macOS both have) and DWARF lines (symbols.c with libdw, ELF only).
 * What a backend cannot do is reported as such (mp_plat_caps), and the
 * public API answers MP_PROF_E_UNSUPPORTED for it; nothing is guessed.
 *
 * None of these functions is called from an allocation hook: they may
 * allocate and take the loader's locks. */
#ifndef MIMPROF_PROFILING_PLATFORM_H
#define MIMPROF_PROFILING_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mp_obj; /* report/maps.h */

typedef struct mp_plat_caps {
    const char *name;   /* "elf", "darwin" or "generic" */
    bool mappings;      /* reports carry the loaded objects as mappings */
    bool build_ids;     /* mappings carry a build-id (GNU note, LC_UUID) */
    bool elf_files;     /* the objects are ELF files symbols.c can read */
    bool heap_images;   /* mp_profiler_write_image is supported */
    bool whole_objects; /* mp_plat_object_code finds the profiler's object */
} mp_plat_caps;

/* What this build's backend can do. */
const mp_plat_caps *mp_plat_caps_get(void);

/* A cheap fingerprint of the set of loaded objects: it changes when an
 * object is loaded or unloaded. False when the backend has none (then the
 * caller re-reads the objects every time). */
bool mp_plat_loader_counters(unsigned long long *adds, unsigned long long *subs);

/* The loaded objects that have executable segments, the main program
 * first, as malloc()ed mp_obj (path, segments, build-id filled, `loaded`
 * set; freed by the caller with free() of path, segs and the object).
 * Returns the number found in *n and the array (malloc()ed) in *out;
 * false on out-of-memory (nothing returned). A backend without loader
 * enumeration returns true with *n == 0. */
bool mp_plat_scan_objects(struct mp_obj ***out, size_t *n);

/* The executable ranges [starts[i], ends[i]) of the loaded object holding
 * the code address `addr`, at most `cap`; *is_main tells whether that
 * object is the main program. 0 when not found or not supported. */
size_t mp_plat_object_code(uintptr_t addr, uintptr_t *starts, uintptr_t *ends, size_t cap,
                           bool *is_main);

/* The name of the function containing the code address `addr`, from the
 * dynamic loader's own symbol information, or NULL when there is none or
 * it cannot be verified to be the containing function (a nearest
 * preceding symbol is never returned as if it were the function). The
 * string lives as long as the object is loaded. */
const char *mp_plat_function_name(uintptr_t addr);

#endif
