/* SPDX-License-Identifier: MIT */
/* Executable PT_LOAD segments of every loaded object, as pprof mappings:
 * start/limit/offset page-aligned like /proc/self/maps, the GNU build-id
 * from PT_NOTE so that a server can symbolize. */
#define _GNU_SOURCE
#include "mappings.h"

#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct collect {
    mp_pyro_mapping *m;
    size_t n, cap;
    unsigned object;
    int oom;
    char exe[PATH_MAX];
} collect;

static void build_id_of(const struct dl_phdr_info *info, char out[129])
{
    out[0] = '\0';
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
            size_t name_sz = (nh->n_namesz + 3u) & ~3u, desc_sz = (nh->n_descsz + 3u) & ~3u;
            const char *name = p + sizeof *nh, *desc = name + name_sz;
            if (desc + desc_sz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz <= 64) {
                for (size_t k = 0; k < nh->n_descsz; k++)
                    snprintf(out + 2 * k, 3, "%02x", (unsigned char)desc[k]);
                return;
            }
            p = desc + desc_sz;
        }
    }
}

static int on_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    collect *c = data;
    unsigned object = c->object++;
    const char *file =
        info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : (object == 0 ? c->exe : "");
    char bid[129];
    build_id_of(info, bid);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t mask = ~((uint64_t)(page > 0 ? page : 4096) - 1);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0)
            continue;
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 32;
            mp_pyro_mapping *m = realloc(c->m, cap * sizeof *m);
            if (!m) {
                c->oom = 1;
                return 1;
            }
            c->m = m;
            c->cap = cap;
        }
        mp_pyro_mapping *m = &c->m[c->n];
        uint64_t vaddr = (uint64_t)info->dlpi_addr + ph->p_vaddr;
        m->start = vaddr & mask;
        m->limit = (vaddr + ph->p_memsz + ~mask) & mask;
        m->offset = (uint64_t)ph->p_offset & mask;
        m->file = strdup(file);
        memcpy(m->build_id, bid, sizeof bid);
        m->object = object;
        if (!m->file) {
            c->oom = 1;
            return 1;
        }
        c->n++;
    }
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const mp_pyro_mapping *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int mp_pyro_mappings_read(mp_pyro_mapping **out, size_t *n)
{
    collect c = {0};
    ssize_t len = readlink("/proc/self/exe", c.exe, sizeof c.exe - 1);
    c.exe[len > 0 ? len : 0] = '\0';
    dl_iterate_phdr(on_object, &c);
    if (c.oom) {
        mp_pyro_mappings_free(c.m, c.n);
        return -1;
    }
    qsort(c.m, c.n, sizeof *c.m, by_start);
    *out = c.m;
    *n = c.n;
    return 0;
}

void mp_pyro_mappings_free(mp_pyro_mapping *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(m[i].file);
    free(m);
}

const mp_pyro_mapping *mp_pyro_mapping_find(const mp_pyro_mapping *m, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (addr < m[mid].start)
            hi = mid;
        else if (addr >= m[mid].limit)
            lo = mid + 1;
        else
            return &m[mid];
    }
    return NULL;
}
