/* SPDX-License-Identifier: MIT */
/* Internal to the report side's symbolizer: the state symbols.c keeps
 * (interned strings, human names, the pc cache) and the per-object state
 * its two readers fill: syms_elf.c (function names from ELF symbol
 * tables) and syms_dwarf.c (functions, files and lines from DWARF). */
#ifndef MIMPROF_PROFILING_REPORT_SYMS_STATE_H
#define MIMPROF_PROFILING_REPORT_SYMS_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../index.h"
#include "arena.h"
#include "elf_reader.h"
#include "symbols.h"

#if MP_HAVE_LIBDW
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

typedef struct cu_range {
    Dwarf_Addr lo, hi; /* [lo, hi) in the module's (biased) addresses */
    Dwarf_Die die;
} cu_range;
#endif

/* Frames one address may expand to (inlined calls included). */
#define MP_SYMS_MAX_INLINE 32

struct mp_obj_syms {
    bool symtab_tried;
    mp_elf_symtab symtab;
#if MP_HAVE_LIBDW
    bool dwfl_tried;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    Dwarf_Addr bias;
    /* Units by address range, built from the units themselves when the
     * object has no .debug_aranges (clang does not emit it by default and
     * libdw 0.188 then finds no unit by address). */
    bool cus_built;
    struct cu_range *cus;
    size_t ncus;
#endif
};

/* An interned linkage name and its interned human name (NULL: none). */
typedef struct human_slot {
    const char *sys, *human;
} human_slot;

/* Each array's index holds its n elements: strs by content, humans by
 * the linkage name's pointer, pcs by address. */
struct mp_syms {
    mp_arena mem;      /* pc entries, frames, strings */
    const char **strs; /* interned strings */
    size_t nstrs, strs_cap;
    mp_index strs_ix;
    human_slot *humans; /* demangled names by linkage name */
    size_t nhumans, humans_cap;
    mp_index humans_ix;
    mp_pcinfo **pcs; /* pc cache */
    size_t npcs, pcs_cap;
    mp_index pcs_ix;
    size_t symtab_bytes; /* sum over objects' symbol tables */
    size_t dwfl_count;   /* open DWARF sessions */
};

/* The interned copy of `str` (equal strings, one pointer); NULL for NULL,
 * "" and out-of-memory. */
const char *mp_syms_intern(mp_syms *s, const char *str);

/* Names frame `f` from the interned linkage name `sys`: func = its human
 * name, demangled once per distinct name, sysname = `sys` when the two
 * differ. A name the demangler refuses, and any C name, is its own human
 * name. */
void mp_syms_set_name(mp_syms *s, mp_frame *f, const char *sys);

/* The object's symbol state, made on first use; NULL on out-of-memory. */
struct mp_obj_syms *mp_syms_of_obj(mp_obj *o);

/* The file an object's symbols are read from. */
const char *mp_syms_file(const mp_obj *o);

/* Where separate debug files live ($MIMPROF_DEBUG_ROOT, else
 * /usr/lib/debug). */
const char *mp_syms_debug_root(void);

/* The interned name of the ELF symbol containing `addr`, or NULL. */
const char *mp_syms_elf_name(mp_syms *s, mp_obj *o, uintptr_t addr);

/* The name the platform layer verified for `addr` (no ELF file), or NULL. */
const char *mp_syms_native_name(mp_syms *s, uintptr_t addr);

#if MP_HAVE_LIBDW
/* Frames of `addr` from DWARF, innermost first, into fr[MP_SYMS_MAX_INLINE];
 * -1 when the address has no DWARF unit. */
int mp_syms_dwarf_frames(mp_syms *s, mp_obj *o, uintptr_t addr, mp_frame *fr, uint8_t *flags);

/* Releases the object's DWARF session and unit ranges. */
void mp_syms_dwarf_forget(mp_syms *s, struct mp_obj_syms *os);
#endif

#endif
