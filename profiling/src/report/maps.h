/* SPDX-License-Identifier: MIT */
/* Internal: the loaded objects of the process and their executable
 * segments, as pprof mappings. Read through the platform layer
 * (../platform/platform.h: dl_iterate_phdr on ELF systems, dyld's image
 * list on macOS, nothing with the generic backend) at report time only (it
 * takes the loader lock and may allocate), cached, and refreshed only when
 * the loader's fingerprint (dlpi_adds/dlpi_subs on ELF) changed.
 *
 * An object that disappears (dlclose) is retained, marked unloaded, so
 * samples taken while it was loaded still find their mapping, unless a
 * newly loaded object overlaps its address range. */
#ifndef MIMPROF_PROFILING_REPORT_MAPS_H
#define MIMPROF_PROFILING_REPORT_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "elf_reader.h"

struct mp_obj_syms; /* symbols.c */

/* One executable PT_LOAD segment, page-aligned like /proc/self/maps. */
typedef struct mp_map_seg {
    uintptr_t start, limit;
    uint64_t file_offset;
} mp_map_seg;

typedef struct mp_obj {
    char *path;     /* real path (main binary: /proc/self/exe); "[vdso]" */
    bool has_file;  /* `path` (or `sym_path`) names a file on disk */
    char *sym_path; /* the file symbols are read from when not `path` (an
                       image's object found elsewhere: mp_maps_add); NULL */
    bool is_main;
    bool loaded;       /* present at the last refresh */
    bool native_names; /* not an ELF file (Mach-O): function names come from
                          the platform layer (mp_plat_function_name) */
    uintptr_t base;    /* dlpi_addr: runtime address - ELF virtual address */
    char build_id[2 * MP_ELF_BUILD_ID_MAX + 1]; /* lower-case hex, "" if none */
    mp_map_seg *segs;
    size_t nsegs;
    uint64_t seen_refresh;    /* refresh number that last saw it loaded */
    struct mp_obj_syms *syms; /* symbol state, owned by symbols.c (NULL until used) */
} mp_obj;

/* An entry of the sorted address index. */
typedef struct mp_map_ref {
    uintptr_t start, limit;
    uint32_t obj; /* index into mp_maps.objs */
    uint32_t seg; /* index into that object's segs */
    uint32_t id;  /* pprof mapping id (1-based, in mp_maps order) */
} mp_map_ref;

typedef struct mp_maps {
    mp_obj **objs; /* objs[0] is the main binary once refreshed */
    size_t nobjs, cap;
    mp_map_ref *index; /* sorted by start, non-overlapping */
    size_t nindex;
    unsigned long long adds, subs;
    bool valid;
    uint64_t refreshes; /* how many real rebuilds happened (tests) */
    bool fixed;         /* objects given by mp_maps_add (another process's,
                           from a heap image): refresh leaves them alone */
    uint64_t unloads;   /* objects seen to disappear, cumulative */
    /* Called for every object dropped for good (to free its symbols). */
    void (*on_drop)(mp_obj *o, void *arg);
    void *on_drop_arg;
} mp_maps;

/* How many unloaded objects are retained at most. */
#define MP_MAPS_MAX_RETAINED 64

void mp_maps_init(mp_maps *m);
void mp_maps_destroy(mp_maps *m);

/* Frees an object (malloc()ed, with malloc()ed path, sym_path and segs),
 * as the platform backends build them; NULL is ignored. Inline: the
 * backends are also linked without this file (the self-frame tests). */
static inline void mp_obj_free(mp_obj *o)
{
    if (o == NULL)
        return;
    free(o->path);
    free(o->sym_path);
    free(o->segs);
    free(o);
}

/* Re-reads the loaded objects when the loader's fingerprint changed (or
 * never read). Without loader enumeration (generic backend) there are no
 * objects and every address is unmapped. Returns false on out-of-memory
 * (the previous state is kept). */
bool mp_maps_refresh(mp_maps *m);

/* Appends an object of another process (a heap image's mapping) and
 * marks the maps fixed: mp_maps_refresh no longer reads this process's
 * objects. Takes ownership of `o` (malloc()ed, with malloc()ed path,
 * sym_path and segs; freed by mp_maps_destroy) on success. Segments must
 * not overlap those already added. False on out-of-memory (`o` is the
 * caller's). */
bool mp_maps_add(mp_maps *m, mp_obj *o);

/* The segment containing `addr`, or NULL. */
const mp_map_ref *mp_maps_lookup(const mp_maps *m, uintptr_t addr);

/* Total number of mappings (segments) in id order: ids 1..n. */
size_t mp_maps_count(const mp_maps *m);

#endif
