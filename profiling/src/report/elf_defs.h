/* SPDX-License-Identifier: MIT */
/* Internal: the ELF definitions the reader needs: <elf.h> where the C
 * library has it (glibc, musl, the BSDs), else the few used here, with the
 * values of the ELF specification, so that the package compiles on
 * platforms without <elf.h> (macOS). */
#ifndef MIMPROF_PROFILING_REPORT_ELF_DEFS_H
#define MIMPROF_PROFILING_REPORT_ELF_DEFS_H

#if defined(__has_include)
#if __has_include(<elf.h>)
#define MP_HAVE_ELF_H 1
#endif
#endif

#ifdef MP_HAVE_ELF_H
#include <elf.h>
#else
#include <stdint.h>

typedef struct {
    unsigned char e_ident[16];
    uint16_t e_type, e_machine;
    uint32_t e_version;
    uint64_t e_entry, e_phoff, e_shoff;
    uint32_t e_flags;
    uint16_t e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx;
} Elf64_Ehdr;
typedef struct {
    uint32_t p_type, p_flags;
    uint64_t p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align;
} Elf64_Phdr;
typedef struct {
    uint32_t sh_name, sh_type;
    uint64_t sh_flags, sh_addr, sh_offset, sh_size;
    uint32_t sh_link, sh_info;
    uint64_t sh_addralign, sh_entsize;
} Elf64_Shdr;
typedef struct {
    uint32_t st_name;
    unsigned char st_info, st_other;
    uint16_t st_shndx;
    uint64_t st_value, st_size;
} Elf64_Sym;

#define ELFMAG           "\177ELF"
#define SELFMAG          4
#define EI_CLASS         4
#define EI_DATA          5
#define ELFCLASS64       2
#define ELFDATA2LSB      1
#define ELFDATA2MSB      2
#define PT_LOAD          1
#define PT_NOTE          4
#define PF_X             1
#define SHT_SYMTAB       2
#define SHT_STRTAB       3
#define SHT_NOTE         7
#define SHT_DYNSYM       11
#define SHN_UNDEF        0
#define STT_FUNC         2
#define STT_GNU_IFUNC    10
#define STB_GLOBAL       1
#define STB_WEAK         2
#define NT_GNU_BUILD_ID  3
#define ELF64_ST_BIND(i) ((i) >> 4)
#define ELF64_ST_TYPE(i) ((i)&0xf)
#endif

#endif
