/* SPDX-License-Identifier: MIT */
/* The ELF backend of the platform layer (platform.h): Linux, FreeBSD.
 *
 * Loaded objects come from dl_iterate_phdr: one mapping per executable
 * PT_LOAD segment (page-aligned like /proc/self/maps), the GNU build-id
 * from the loaded image's PT_NOTE segments, the main program's real path
 * from /proc/self/exe. Change detection uses the loader's dlpi_adds and
 * dlpi_subs counters. Function names are not taken from the loader
 * (symbols.c reads .symtab/.dynsym from the files). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "platform.h"

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../report/maps.h"

static const mp_plat_caps caps = {
    .name = "elf",
    .mappings = true,
    .build_ids = true,
    .elf_files = true,
    .heap_images = true,
    .whole_objects = true,
};

const mp_plat_caps *mp_plat_caps_get(void) { return &caps; }

const char *mp_plat_function_name(uintptr_t addr)
{
    (void)addr;
    return NULL; /* symbols.c reads the ELF files */
}

static uintptr_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uintptr_t)p : 4096;
}

size_t mp_maps_image_build_id(uintptr_t base, const void *phdrs, size_t phnum,
                              uint8_t out[MP_ELF_BUILD_ID_MAX])
{
    const ElfW(Phdr) *ph = phdrs;
    for (size_t i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_memsz == 0)
            continue;
        /* Note segments lie inside a readable PT_LOAD of the loaded image. */
        size_t n = mp_elf_notes_build_id((const void *)(base + ph[i].p_vaddr),
                                         (size_t)ph[i].p_memsz, ph[i].p_align, out);
        if (n)
            return n;
    }
    return 0;
}

/* ---- change detection ---- */

static int counters_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *c = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        c[0] = info->dlpi_adds;
        c[1] = info->dlpi_subs;
        c[2] = 1;
    }
    return 1; /* the counters are the same in every entry: stop */
}

bool mp_plat_loader_counters(unsigned long long *adds, unsigned long long *subs)
{
    unsigned long long c[3] = {0, 0, 0};
    dl_iterate_phdr(counters_cb, c);
    *adds = c[0];
    *subs = c[1];
    return c[2] != 0;
}

/* ---- reading the loader's list ---- */

typedef struct scan {
    mp_obj **found;
    size_t n, cap;
    bool first;
    bool nomem;
    char exe[PATH_MAX];
} scan;

static mp_obj *make_obj(const struct dl_phdr_info *info, bool is_main, const char *exe)
{
    uintptr_t pg = page_size();
    size_t nexec = 0;
    for (size_t i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X))
            nexec++;
    if (nexec == 0)
        return NULL;
    mp_obj *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->segs = calloc(nexec, sizeof *o->segs);
    if (o->segs == NULL) {
        free(o);
        return NULL;
    }
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        uintptr_t limit = start + ph->p_memsz;
        mp_map_seg *s = &o->segs[o->nsegs++];
        s->start = start & ~(pg - 1);
        s->limit = (limit + pg - 1) & ~(pg - 1);
        s->file_offset = ph->p_offset & ~(uint64_t)(pg - 1);
    }
    o->base = info->dlpi_addr;
    o->is_main = is_main;
    o->loaded = true;

    const char *name = info->dlpi_name;
    char real[PATH_MAX];
    if (is_main && exe[0]) {
        o->path = strdup(exe);
        o->has_file = true;
    } else if (name != NULL && name[0] != '\0' && realpath(name, real) != NULL) {
        o->path = strdup(real);
        o->has_file = true;
    } else if (name != NULL && strstr(name, "vdso") != NULL) {
        o->path = strdup("[vdso]");
    } else {
        o->path = strdup(name != NULL && name[0] ? name : "[unknown]");
    }
    if (o->path == NULL) {
        mp_obj_free(o);
        return NULL;
    }
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    size_t idlen = mp_maps_image_build_id(info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, id);
    mp_elf_hex(id, idlen, o->build_id);
    return o;
}

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    scan *s = arg;
    bool is_main = s->first;
    s->first = false;
    if (s->nomem)
        return 1;
    mp_obj *o = make_obj(info, is_main, s->exe);
    if (o == NULL)
        return 0; /* no executable segment (or no memory: the object is missed) */
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 32;
        mp_obj **f = realloc(s->found, nc * sizeof *f);
        if (f == NULL) {
            mp_obj_free(o);
            s->nomem = true;
            return 1;
        }
        s->found = f;
        s->cap = nc;
    }
    s->found[s->n++] = o;
    return 0;
}

bool mp_plat_scan_objects(mp_obj ***out, size_t *n)
{
    scan *s = calloc(1, sizeof *s);
    if (s == NULL)
        return false;
    s->first = true;
    ssize_t len = readlink("/proc/self/exe", s->exe, sizeof s->exe - 1);
    s->exe[len > 0 ? (size_t)len : 0] = '\0';
    dl_iterate_phdr(scan_cb, s);
    if (s->nomem) {
        for (size_t i = 0; i < s->n; i++)
            mp_obj_free(s->found[i]);
        free(s->found);
        free(s);
        return false;
    }
    *out = s->found;
    *n = s->n;
    free(s);
    return true;
}

/* ---- the object holding an address ---- */

typedef struct find {
    uintptr_t addr; /* an address of code in the object looked for */
    bool found;
    bool is_main;
    bool first;
    uintptr_t *starts, *ends;
    size_t n, cap;
} find;

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find *f = arg;
    bool first = f->first;
    f->first = false;
    bool hit = false;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t s = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->addr >= s &&
            f->addr < s + ph->p_memsz)
            hit = true;
    }
    if (!hit)
        return 0;
    f->found = true;
    f->is_main = first;
    for (size_t i = 0; i < info->dlpi_phnum && f->n < f->cap; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            f->starts[f->n] = info->dlpi_addr + ph->p_vaddr;
            f->ends[f->n] = f->starts[f->n] + ph->p_memsz;
            f->n++;
        }
    }
    return 1;
}

size_t mp_plat_object_code(uintptr_t addr, uintptr_t *starts, uintptr_t *ends, size_t cap,
                           bool *is_main)
{
    find f = {.addr = addr, .first = true, .starts = starts, .ends = ends, .cap = cap};
    dl_iterate_phdr(find_cb, &f);
    *is_main = f.found && f.is_main;
    return f.found ? f.n : 0;
}
