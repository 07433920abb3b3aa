/* SPDX-License-Identifier: MIT */
/* The ELF backend of the platform layer (platform.h): Linux, FreeBSD.
 *
 * Loaded objects come from the image library's module scan
 * (mp_img_modules_load: dl_iterate_phdr, the GNU build-id from each
 * loaded image's PT_NOTE segments), the one scan of loaded modules in the
 * workspace: one mapping per executable PT_LOAD segment (page-aligned like
 * /proc/self/maps), the main program's real path from /proc/self/exe.
 * Change detection uses the loader's dlpi_adds and dlpi_subs counters.
 * Function names are not taken from the loader (symbols.c reads
 * .symtab/.dynsym from the files). */
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

#include <mimprof/image.h>

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

/* The mp_obj of module `m`: its executable segments, page-aligned; NULL
 * when it has none (or on out-of-memory: the object is missed). */
static mp_obj *make_obj(const mp_img_module *m, const char *exe)
{
    uintptr_t pg = page_size();
    size_t nexec = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        nexec += m->segs[i].exec;
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
    for (size_t i = 0; i < m->nsegs; i++) {
        const mp_img_segment *g = &m->segs[i];
        if (!g->exec)
            continue;
        mp_map_seg *s = &o->segs[o->nsegs++];
        s->start = g->start & ~(pg - 1);
        s->limit = (g->limit + pg - 1) & ~(pg - 1);
        s->file_offset = g->file_offset & ~(uint64_t)(pg - 1);
    }
    o->base = m->bias;
    o->is_main = m->is_main;
    o->loaded = true;

    const char *name = m->name;
    char real[PATH_MAX];
    if (m->is_main && exe[0]) {
        o->path = strdup(exe);
        o->has_file = true;
    } else if (name[0] != '\0' && realpath(name, real) != NULL) {
        o->path = strdup(real);
        o->has_file = true;
    } else if (strstr(name, "vdso") != NULL) {
        o->path = strdup("[vdso]");
    } else {
        o->path = strdup(name[0] ? name : "[unknown]");
    }
    if (o->path == NULL) {
        mp_obj_free(o);
        return NULL;
    }
    size_t idlen = m->build_id_len < MP_ELF_BUILD_ID_MAX ? m->build_id_len : MP_ELF_BUILD_ID_MAX;
    mp_elf_hex(m->build_id, idlen, o->build_id);
    return o;
}

bool mp_plat_scan_objects(mp_obj ***out, size_t *n)
{
    mp_img_modules *mods;
    if (mp_img_modules_load(&mods) != MP_IMG_OK)
        return false;
    size_t count = mp_img_modules_count(mods);
    mp_obj **found = malloc((count ? count : 1) * sizeof *found);
    char *exe = malloc(PATH_MAX);
    if (found == NULL || exe == NULL) {
        free(found);
        free(exe);
        mp_img_modules_free(mods);
        return false;
    }
    ssize_t len = readlink("/proc/self/exe", exe, PATH_MAX - 1);
    exe[len > 0 ? (size_t)len : 0] = '\0';
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        mp_obj *o = make_obj(mp_img_modules_at(mods, i), exe);
        if (o != NULL) /* no executable segment (or no memory: the object is missed) */
            found[k++] = o;
    }
    free(exe);
    mp_img_modules_free(mods);
    *out = found;
    *n = k;
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
