/* SPDX-License-Identifier: MIT */
/* Internal: report-time symbolization of instruction addresses, cached
 * across reports.
 *
 *  - functions: ELF .symtab, else .dynsym, of the object's file on disk
 *    (checked against the build-id read from the loaded image);
 *  - lines: DWARF through libdw (when built with it): innermost function,
 *    file:line, and the chain of inlined frames; falls back to the ELF
 *    symbol where the address has no DWARF.
 *
 * Names: a frame's func is its human name (demangle.h: C++ and Rust
 * demangled and qualified, C unchanged) and sysname the linkage name it
 * came from. functions: the ELF symbol, demangled. lines: each frame's
 * (physical or inlined) DW_AT_linkage_name, found through
 * DW_AT_abstract_origin and DW_AT_specification, demangled; a C++ frame
 * without one is qualified from the namespaces and classes that enclose
 * its declaration. Demangling happens once per distinct linkage name and
 * is cached with the strings (across reports, until a trim).
 *
 * Memory: the symbol tables, the per-address cache and its interned
 * strings are counted in mp_syms_bytes(); mp_syms_trim() drops caches to
 * stay under a budget. libdw's own internal structures are not included
 * (they are measured by the benchmark instead).
 *
 * Never used from an allocation hook.
 */
#ifndef MIMPROF_PROFILING_REPORT_SYMBOLS_H
#define MIMPROF_PROFILING_REPORT_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/profiling.h>

#include "maps.h"

/* One frame of a location (innermost first). Strings are interned and
 * live until the next mp_syms_trim/mp_syms_clear. */
typedef struct mp_frame {
    const char *func;    /* the human name (demangled, qualified); NULL when unknown */
    const char *sysname; /* the linkage name when it differs from func, else NULL */
    const char *file;    /* NULL when unknown */
    int64_t line;        /* 0 when unknown */
} mp_frame;

enum {
    MP_PC_INLINE = 1 /* DWARF scopes were read: inlined frames are expanded */
};

typedef struct mp_pcinfo {
    uintptr_t addr;
    mp_frame *frames;
    uint16_t nframes;
    uint8_t mode;  /* the mp_prof_symbolize it was resolved with */
    uint8_t flags; /* MP_PC_* */
} mp_pcinfo;

typedef struct mp_syms mp_syms;

mp_syms *mp_syms_new(void);
void mp_syms_free(mp_syms *s);

/* Resolves `addr` (a lookup address: inside the instruction) of object `o`
 * (may be NULL: outside every mapping). `local`: the address is one of this
 * process (a live report), so the platform layer may name it (objects that
 * are not ELF files, and unmapped addresses when the platform has no
 * loader enumeration); false for another process's addresses (a heap
 * image), which are named from the mapped files only. The result stays
 * valid until mp_syms_trim or mp_syms_clear_addresses. NULL only on
 * out-of-memory. */
const mp_pcinfo *mp_syms_resolve(mp_syms *s, mp_obj *o, uintptr_t addr, mp_prof_symbolize mode,
                                 bool local);

/* Releases the symbol state attached to `o` (before `o` is freed). */
void mp_syms_forget_obj(mp_syms *s, mp_obj *o);

/* Forgets every cached address (e.g. after an object was unloaded, the
 * same addresses may mean something else). */
void mp_syms_clear_addresses(mp_syms *s);

/* Bytes held by symbol data. */
size_t mp_syms_bytes(const mp_syms *s);

/* If over `budget` bytes: drops the address cache, then the symbol tables
 * and DWARF sessions of `m`'s objects, until under it (or nothing is left).
 * Only between reports. */
void mp_syms_trim(mp_syms *s, mp_maps *m, size_t budget);

/* Whether DWARF line symbolization is built in. */
bool mp_syms_have_lines(void);

#endif
