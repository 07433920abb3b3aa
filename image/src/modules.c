/* SPDX-License-Identifier: MIT */
/* The loaded modules of this process (dl_iterate_phdr): their PT_LOAD
 * segments and GNU build-ids, for naming and resolving `code` and, through
 * the public mp_img_modules_* API (image.h), for the profiling library's
 * pprof mappings. A snapshot holds pointers into the modules themselves
 * (their names, their mapped notes), so it is valid while no module is
 * unloaded. */
#define _GNU_SOURCE
#include "internal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

struct collect {
    struct mp_img_modules *mods;
    size_t cap, nsegs, segcap;
    size_t entries; /* loader entries seen: the first is the main program */
    int failed;
};

/* Finds the NT_GNU_BUILD_ID note in one mapped PT_NOTE segment, whose
 * notes are padded to `align` (4, or 8 for 8-byte aligned note segments). */
static void find_build_id(const unsigned char *p, size_t len, uint64_t align, mp_img_module *m)
{
    size_t a = align == 8 ? 8 : 4;
    size_t off = 0;
    while (off + sizeof(ElfW(Nhdr)) <= len) {
        ElfW(Nhdr) n;
        memcpy(&n, p + off, sizeof n);
        size_t name_at = off + sizeof n;
        size_t desc_at = name_at + (((size_t)n.n_namesz + a - 1) & ~(a - 1));
        size_t next = desc_at + (((size_t)n.n_descsz + a - 1) & ~(a - 1));
        if (n.n_namesz > len || n.n_descsz > len || desc_at + n.n_descsz > len || next <= off)
            return;
        if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && n.n_descsz > 0 &&
            memcmp(p + name_at, "GNU", 4) == 0) {
            m->build_id = p + desc_at;
            m->build_id_len = n.n_descsz;
            return;
        }
        off = next;
    }
}

static bool reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 32;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static int on_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct collect *c = data;
    struct mp_img_modules *mods = c->mods;
    if (!reserve((void **)&mods->m, &c->cap, mods->n + 1, sizeof *mods->m) ||
        !reserve((void **)&mods->segs, &c->segcap, c->nsegs + info->dlpi_phnum,
                 sizeof *mods->segs)) {
        c->failed = 1;
        return 1;
    }
    bool first = c->entries++ == 0;
    mp_img_module m = {.bias = info->dlpi_addr, .lo = UINTPTR_MAX, .hi = 0};
    /* segs is an index into mods->segs until the scan ends (it moves). */
    size_t seg0 = c->nsegs;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD) {
            if (start < m.lo)
                m.lo = start;
            if (start + ph->p_memsz > m.hi)
                m.hi = start + ph->p_memsz;
            mods->segs[c->nsegs++] = (mp_img_segment){
                start, start + ph->p_memsz, (uint64_t)ph->p_offset, (ph->p_flags & PF_X) != 0};
        } else if (ph->p_type == PT_NOTE && !m.build_id) {
            /* Note segments lie inside a readable PT_LOAD of the image. */
            find_build_id((const unsigned char *)start, ph->p_filesz, ph->p_align, &m);
        }
    }
    if (m.lo >= m.hi) {
        c->nsegs = seg0;
        return 0;
    }
    m.segs = (const mp_img_segment *)(uintptr_t)seg0;
    m.nsegs = c->nsegs - seg0;
    m.is_main = first;
    m.name = info->dlpi_name ? info->dlpi_name : "";
    m.path = m.name;
    if (!m.path[0] && first) {
        /* The main program has no name here: use the file it was run as. */
        const char *exe = (const char *)getauxval(AT_EXECFN);
        m.path = exe ? exe : "";
    }
    mods->m[mods->n++] = m;
    return 0;
}

int img_modules_load(struct mp_img_modules *mods)
{
    memset(mods, 0, sizeof *mods);
    struct collect c = {.mods = mods};
    dl_iterate_phdr(on_module, &c);
    if (c.failed) {
        img_modules_free(mods);
        return -1;
    }
    for (size_t i = 0; i < mods->n; i++)
        mods->m[i].segs = mods->segs + (size_t)(uintptr_t)mods->m[i].segs;
    return 0;
}

void img_modules_free(struct mp_img_modules *mods)
{
    free(mods->m);
    free(mods->segs);
    memset(mods, 0, sizeof *mods);
}

mp_img_status mp_img_modules_load(mp_img_modules **out)
{
    if (!out)
        return MP_IMG_E_ARGUMENT;
    mp_img_modules *mods = malloc(sizeof *mods);
    if (!mods || img_modules_load(mods) != 0) {
        free(mods);
        return MP_IMG_E_NOMEM;
    }
    *out = mods;
    return MP_IMG_OK;
}

void mp_img_modules_free(mp_img_modules *mods)
{
    if (!mods)
        return;
    img_modules_free(mods);
    free(mods);
}

size_t mp_img_modules_count(const mp_img_modules *mods) { return mods ? mods->n : 0; }

const mp_img_module *mp_img_modules_at(const mp_img_modules *mods, size_t i)
{
    return mods && i < mods->n ? &mods->m[i] : NULL;
}

const mp_img_module *mp_img_modules_find_addr(const mp_img_modules *mods, uintptr_t addr)
{
    for (size_t i = 0; mods && i < mods->n; i++)
        if (addr >= mods->m[i].lo && addr < mods->m[i].hi)
            return &mods->m[i];
    return NULL;
}

const mp_img_module *mp_img_modules_find_build_id(const mp_img_modules *mods,
                                                  const unsigned char *id, size_t len)
{
    if (len == 0 || !id)
        return NULL;
    for (size_t i = 0; mods && i < mods->n; i++)
        if (mods->m[i].build_id_len == len && memcmp(mods->m[i].build_id, id, len) == 0)
            return &mods->m[i];
    return NULL;
}
