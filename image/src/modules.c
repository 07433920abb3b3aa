/* SPDX-License-Identifier: MIT */
/* The loaded modules of this process (dl_iterate_phdr): the span of their
 * PT_LOAD segments and their GNU build-id, for naming and resolving `code`.
 * A snapshot holds pointers into the modules themselves (their names, their
 * mapped notes), so it is valid while no module is unloaded. */
#define _GNU_SOURCE
#include "internal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

struct collect {
    struct img_modules *mods;
    size_t cap;
    int failed;
};

/* Finds the NT_GNU_BUILD_ID note in one PT_NOTE segment. */
static void find_build_id(const unsigned char *p, size_t len, struct img_module *m)
{
    size_t off = 0;
    while (off + sizeof(ElfW(Nhdr)) <= len) {
        ElfW(Nhdr) n;
        memcpy(&n, p + off, sizeof n);
        size_t name_at = off + sizeof n;
        size_t desc_at = name_at + (((size_t)n.n_namesz + 3) & ~(size_t)3);
        size_t next = desc_at + (((size_t)n.n_descsz + 3) & ~(size_t)3);
        if (n.n_namesz > len || n.n_descsz > len || next > len || next <= off)
            return;
        if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && memcmp(p + name_at, "GNU", 4) == 0) {
            m->build_id = p + desc_at;
            m->build_id_len = n.n_descsz;
            return;
        }
        off = next;
    }
}

static int on_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct collect *c = data;
    struct img_modules *mods = c->mods;
    if (mods->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        struct img_module *m = realloc(mods->m, cap * sizeof *m);
        if (!m) {
            c->failed = 1;
            return 1;
        }
        mods->m = m;
        c->cap = cap;
    }
    struct img_module m = {.bias = info->dlpi_addr, .lo = UINTPTR_MAX, .hi = 0};
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (start < m.lo)
                m.lo = start;
            if (start + ph->p_memsz > m.hi)
                m.hi = start + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE && !m.build_id) {
            find_build_id((const unsigned char *)start, ph->p_filesz, &m);
        }
    }
    if (m.lo >= m.hi)
        return 0;
    m.path = info->dlpi_name;
    if (!m.path || !m.path[0]) {
        /* The main program has no name here: use the file it was run as. */
        const char *exe = (const char *)getauxval(AT_EXECFN);
        m.path = mods->n == 0 && exe ? exe : "";
    }
    mods->m[mods->n++] = m;
    return 0;
}

int img_modules_load(struct img_modules *mods)
{
    mods->m = NULL;
    mods->n = 0;
    struct collect c = {mods, 0, 0};
    dl_iterate_phdr(on_module, &c);
    if (c.failed) {
        img_modules_free(mods);
        return -1;
    }
    return 0;
}

void img_modules_free(struct img_modules *mods)
{
    free(mods->m);
    mods->m = NULL;
    mods->n = 0;
}

const struct img_module *img_modules_find_addr(const struct img_modules *mods, uintptr_t addr)
{
    for (size_t i = 0; i < mods->n; i++)
        if (addr >= mods->m[i].lo && addr < mods->m[i].hi)
            return &mods->m[i];
    return NULL;
}

const struct img_module *img_modules_find_build_id(const struct img_modules *mods,
                                                   const unsigned char *id, size_t len)
{
    if (len == 0)
        return NULL;
    for (size_t i = 0; i < mods->n; i++)
        if (mods->m[i].build_id_len == len && memcmp(mods->m[i].build_id, id, len) == 0)
            return &mods->m[i];
    return NULL;
}
