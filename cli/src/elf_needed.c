/* SPDX-License-Identifier: MIT */
/* ELF dynamic sections (elf_needed.h). Only ELFCLASS64, ELFDATA2LSB: the
 * machines the preload objects are built for. The section headers name
 * the dynamic section (SHT_DYNAMIC) and, through its sh_link, its string
 * table; every index, offset and size read from the file is checked
 * against what was read before use. */
#include "elf_needed.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

/* Generous bounds: real objects have a few dozen sections and a dynamic
 * string table of some kilobytes. */
#define MAX_SECTIONS 4096u
#define MAX_DYN      (64u << 10)
#define MAX_STRTAB   (4u << 20)

static bool read_all(mpt_elf_read_fn rd, void *ctx, void *buf, size_t n, uint64_t off)
{
    return rd(ctx, buf, n, off) == (ssize_t)n;
}

/* The NUL-terminated string at `off` of strtab[len] into out[cap];
 * false when it runs past the table or does not fit. */
static bool str_at(const char *strtab, size_t len, uint64_t off, char *out, size_t cap)
{
    if (off >= len)
        return false;
    const char *s = strtab + off;
    const char *nul = memchr(s, '\0', len - off);
    if (nul == NULL || (size_t)(nul - s) >= cap)
        return false;
    memcpy(out, s, (size_t)(nul - s) + 1);
    return true;
}

bool mpt_elf_needed(mpt_elf_read_fn rd, void *ctx, mpt_elf_dyn *out)
{
    memset(out, 0, sizeof *out);
    Elf64_Ehdr eh;
    if (!read_all(rd, ctx, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > MAX_SECTIONS)
        return false;
    Elf64_Shdr *sh = malloc(eh.e_shnum * sizeof *sh);
    if (sh == NULL)
        return false;
    bool ok = false;
    Elf64_Dyn *dyn = NULL;
    char *strtab = NULL;
    if (!read_all(rd, ctx, sh, eh.e_shnum * sizeof *sh, eh.e_shoff))
        goto out;
    unsigned d = 0;
    while (d < eh.e_shnum && sh[d].sh_type != SHT_DYNAMIC)
        d++;
    if (d == eh.e_shnum || sh[d].sh_link >= eh.e_shnum || sh[d].sh_size > MAX_DYN ||
        sh[sh[d].sh_link].sh_size > MAX_STRTAB || sh[sh[d].sh_link].sh_size == 0)
        goto out;
    size_t ndyn = sh[d].sh_size / sizeof *dyn;
    size_t slen = sh[sh[d].sh_link].sh_size;
    dyn = malloc(ndyn ? ndyn * sizeof *dyn : 1);
    strtab = malloc(slen);
    if (dyn == NULL || strtab == NULL ||
        !read_all(rd, ctx, dyn, ndyn * sizeof *dyn, sh[d].sh_offset) ||
        !read_all(rd, ctx, strtab, slen, sh[sh[d].sh_link].sh_offset))
        goto out;
    char rpath[sizeof out->runpath] = "";
    bool have_runpath = false;
    for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
        uint64_t v = dyn[i].d_un.d_val;
        if (dyn[i].d_tag == DT_NEEDED && out->nneeded < MPT_ELF_MAX_NEEDED &&
            str_at(strtab, slen, v, out->needed[out->nneeded], sizeof out->needed[0]))
            out->nneeded++;
        else if (dyn[i].d_tag == DT_RUNPATH)
            have_runpath = str_at(strtab, slen, v, out->runpath, sizeof out->runpath);
        else if (dyn[i].d_tag == DT_RPATH && !str_at(strtab, slen, v, rpath, sizeof rpath))
            rpath[0] = '\0';
    }
    /* DT_RPATH counts only without DT_RUNPATH (ld.so(8)). */
    if (!have_runpath)
        memcpy(out->runpath, rpath, sizeof rpath);
    ok = true;
out:
    free(sh);
    free(dyn);
    free(strtab);
    return ok;
}
