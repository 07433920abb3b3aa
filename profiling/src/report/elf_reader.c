/* SPDX-License-Identifier: MIT */
/* A small, bounds-checked ELF reader: function symbols and GNU build-id.
 * See elf_reader.h. Every structure is copied out with memcpy, so
 * unaligned input is fine; every offset is checked before use. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "elf_reader.h"

#include "elf_defs.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if UINTPTR_MAX != UINT64_MAX
#error "the report side reads 64-bit ELF only"
#endif

/* [off, off + len) inside [0, size)? Overflow-safe. */
static bool in_bounds(uint64_t off, uint64_t len, size_t size)
{
    return off <= size && len <= size - off;
}

static uint64_t pad_to(uint64_t v, uint64_t align) { return (v + (align - 1)) & ~(align - 1); }

size_t mp_elf_notes_build_id(const void *notes, size_t len, uint64_t align,
                             uint8_t out[MP_ELF_BUILD_ID_MAX])
{
    const uint8_t *p = notes;
    uint64_t a = align == 8 ? 8 : 4;
    uint64_t off = 0;
    if (notes == NULL)
        return 0;
    while (in_bounds(off, 12, len)) {
        uint32_t hdr[3];
        memcpy(hdr, p + off, sizeof hdr);
        uint64_t namesz = hdr[0], descsz = hdr[1], type = hdr[2];
        uint64_t name_off = off + 12;
        uint64_t desc_off = name_off + pad_to(namesz, a);
        if (!in_bounds(name_off, namesz, len) || desc_off > len ||
            !in_bounds(desc_off, descsz, len))
            return 0;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(p + name_off, "GNU", 4) == 0 &&
            descsz > 0) {
            size_t n = descsz < MP_ELF_BUILD_ID_MAX ? (size_t)descsz : MP_ELF_BUILD_ID_MAX;
            memcpy(out, p + desc_off, n);
            return n;
        }
        uint64_t next = desc_off + pad_to(descsz, a);
        if (next <= off) /* cannot happen (header is 12 bytes), but never loop */
            return 0;
        off = next;
    }
    return 0;
}

/* Validates the ELF header: native class and data encoding. */
static bool read_ehdr(const uint8_t *data, size_t size, Elf64_Ehdr *eh)
{
    if (data == NULL || size < sizeof *eh)
        return false;
    memcpy(eh, data, sizeof *eh);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return false;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (eh->e_ident[EI_DATA] != ELFDATA2LSB)
        return false;
#else
    if (eh->e_ident[EI_DATA] != ELFDATA2MSB)
        return false;
#endif
    return true;
}

/* Section header table: count and a checked location. */
static bool section_table(const uint8_t *data, size_t size, const Elf64_Ehdr *eh, uint64_t *shoff,
                          uint64_t *shnum)
{
    *shoff = eh->e_shoff;
    *shnum = eh->e_shnum;
    if (*shoff == 0)
        return false;
    if (eh->e_shentsize != sizeof(Elf64_Shdr))
        return false;
    if (!in_bounds(*shoff, sizeof(Elf64_Shdr), size))
        return false;
    if (*shnum == 0) { /* extended numbering: the count is in section 0 */
        Elf64_Shdr s0;
        memcpy(&s0, data + *shoff, sizeof s0);
        *shnum = s0.sh_size;
    }
    if (*shnum == 0 || *shnum > (size - *shoff) / sizeof(Elf64_Shdr))
        return false;
    return true;
}

static void get_shdr(const uint8_t *data, uint64_t shoff, uint64_t i, Elf64_Shdr *sh)
{
    memcpy(sh, data + shoff + i * sizeof(Elf64_Shdr), sizeof *sh);
}

size_t mp_elf_file_build_id(const uint8_t *data, size_t size, uint8_t out[MP_ELF_BUILD_ID_MAX])
{
    Elf64_Ehdr eh;
    if (!read_ehdr(data, size, &eh))
        return 0;
    /* Program headers first: that is what the loader mapped. */
    if (eh.e_phoff != 0 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
        eh.e_phnum <= (size >= eh.e_phoff ? (size - eh.e_phoff) / sizeof(Elf64_Phdr) : 0) &&
        in_bounds(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size)) {
        for (uint64_t i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            memcpy(&ph, data + eh.e_phoff + i * sizeof ph, sizeof ph);
            if (ph.p_type != PT_NOTE || !in_bounds(ph.p_offset, ph.p_filesz, size))
                continue;
            size_t n = mp_elf_notes_build_id(data + ph.p_offset, ph.p_filesz, ph.p_align, out);
            if (n)
                return n;
        }
    }
    uint64_t shoff, shnum;
    if (!section_table(data, size, &eh, &shoff, &shnum))
        return 0;
    for (uint64_t i = 0; i < shnum; i++) {
        Elf64_Shdr sh;
        get_shdr(data, shoff, i, &sh);
        if (sh.sh_type != SHT_NOTE || !in_bounds(sh.sh_offset, sh.sh_size, size))
            continue;
        size_t n = mp_elf_notes_build_id(data + sh.sh_offset, sh.sh_size, sh.sh_addralign, out);
        if (n)
            return n;
    }
    return 0;
}

/* A candidate before sorting and de-duplication. */
typedef struct cand {
    uint64_t addr, size;
    uint32_t name; /* offset into the string table */
    uint8_t rank;  /* binding preference: global 0, weak 1, local 2 */
} cand;

/* The order among candidates of one address: lower is preferred. */
static int cand_cmp(const cand *x, const cand *y)
{
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if ((x->size != 0) != (y->size != 0))
        return x->size != 0 ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name ? 1 : 0;
}

/* Sorts c[0, n) by address, stably, with tmp[0, n) as scratch, and
 * returns the sorted array (c or tmp): an LSD radix sort with one pass per
 * byte in which the addresses differ (three for an object under 16 MiB).
 * Why not qsort: its comparison callback and its merge copies cost ~700
 * instructions a symbol, 5M of the default report at exit when libc's
 * separate debug file (6,800 functions) is installed; a pass costs ~20. */
static cand *sort_by_addr(cand *c, cand *tmp, size_t n)
{
    uint64_t differ = 0;
    for (size_t i = 1; i < n; i++)
        differ |= c[i].addr ^ c[0].addr;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (((differ >> shift) & 0xff) == 0)
            continue; /* every address has the same byte here */
        size_t start[256] = {0};
        for (size_t i = 0; i < n; i++)
            start[(c[i].addr >> shift) & 0xff]++;
        size_t sum = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t k = start[b];
            start[b] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++)
            tmp[start[(c[i].addr >> shift) & 0xff]++] = c[i];
        cand *t = c;
        c = tmp;
        tmp = t;
    }
    return c;
}

/* Keeps one candidate per address, the best by cand_cmp (binding, then a
 * known size, then the name's offset: the same choice whatever order the
 * section lists them in); c sorted by address. Returns the count kept. */
static size_t best_per_address(cand *c, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m != 0 && c[m - 1].addr == c[i].addr) {
            if (cand_cmp(&c[i], &c[m - 1]) < 0)
                c[m - 1] = c[i];
        } else {
            c[m++] = c[i];
        }
    }
    return m;
}

/* Reads one symbol section into `out`; MP_ELF_E_NOSYMS when it holds no
 * usable function. */
static mp_elf_status read_symsec(const uint8_t *data, size_t size, uint64_t shoff, uint64_t shnum,
                                 const Elf64_Shdr *sec, mp_elf_symtab *out)
{
    if (sec->sh_entsize != 0 && sec->sh_entsize != sizeof(Elf64_Sym))
        return MP_ELF_E_FORMAT;
    if (!in_bounds(sec->sh_offset, sec->sh_size, size) || sec->sh_link >= shnum)
        return MP_ELF_E_FORMAT;
    Elf64_Shdr strsec;
    get_shdr(data, shoff, sec->sh_link, &strsec);
    if (strsec.sh_type != SHT_STRTAB || !in_bounds(strsec.sh_offset, strsec.sh_size, size) ||
        strsec.sh_size > UINT32_MAX)
        return MP_ELF_E_FORMAT;
    const char *strtab = (const char *)data + strsec.sh_offset;
    uint64_t strsize = strsec.sh_size;
    uint64_t nsym = sec->sh_size / sizeof(Elf64_Sym);
    if (nsym == 0)
        return MP_ELF_E_NOSYMS;

    cand *all = malloc(2 * nsym * sizeof *all); /* the candidates, then the sort's scratch */
    if (all == NULL)
        return MP_ELF_E_NOMEM;
    cand *c = all;
    size_t n = 0;
    uint64_t lo = UINT64_MAX, hi = 0; /* referenced string range */
    for (uint64_t i = 0; i < nsym; i++) {
        Elf64_Sym s;
        memcpy(&s, data + sec->sh_offset + i * sizeof s, sizeof s);
        unsigned t = ELF64_ST_TYPE(s.st_info);
        if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
            continue;
        if (s.st_name == 0 || s.st_name >= strsize)
            continue;
        size_t len = strnlen(strtab + s.st_name, strsize - s.st_name);
        if (len == 0 || len == strsize - s.st_name) /* empty or unterminated */
            continue;
        unsigned b = ELF64_ST_BIND(s.st_info);
        c[n].addr = s.st_value;
        c[n].size = s.st_size;
        c[n].name = s.st_name;
        c[n].rank = b == STB_GLOBAL ? 0 : b == STB_WEAK ? 1 : 2;
        if (s.st_name < lo)
            lo = s.st_name;
        if (s.st_name + len + 1 > hi)
            hi = s.st_name + len + 1;
        n++;
    }
    if (n == 0) {
        free(all);
        return MP_ELF_E_NOSYMS;
    }
    c = sort_by_addr(c, all + nsym, n);
    size_t m = best_per_address(c, n);

    out->syms = malloc(m * sizeof *out->syms);
    out->names = malloc(hi - lo);
    if (out->syms == NULL || out->names == NULL) {
        free(out->syms);
        free(out->names);
        free(all);
        out->syms = NULL;
        out->names = NULL;
        return MP_ELF_E_NOMEM;
    }
    memcpy(out->names, strtab + lo, hi - lo);
    out->names_len = hi - lo;
    for (size_t i = 0; i < m; i++) {
        out->syms[i].addr = c[i].addr;
        out->syms[i].size = c[i].size;
        out->syms[i].name = (uint32_t)(c[i].name - lo);
        /* A .symtab names versioned definitions "name@@VERSION" or
         * "name@VERSION" (glibc's __libc_start_main@@GLIBC_2.34); the
         * function is "name", as .dynsym spells it. No C or mangled C++
         * name holds '@'. */
        char *at = strchr(out->names + out->syms[i].name, '@');
        if (at != NULL && at != out->names + out->syms[i].name)
            *at = '\0';
    }
    out->count = m;
    free(all);
    return MP_ELF_OK;
}

/* The first of .symtab then .dynsym, among those `sources` names, that
 * holds functions. */
static mp_elf_status read_symbols(const uint8_t *data, size_t size, unsigned sources,
                                  mp_elf_symtab *out)
{
    memset(out, 0, sizeof *out);
    Elf64_Ehdr eh;
    if (!read_ehdr(data, size, &eh))
        return MP_ELF_E_FORMAT;
    uint64_t shoff, shnum;
    if (!section_table(data, size, &eh, &shoff, &shnum))
        return MP_ELF_E_NOSYMS; /* e.g. sections stripped entirely */
    static const struct {
        uint32_t type;
        mp_elf_sym_source source;
    } order[] = {{SHT_SYMTAB, MP_ELF_SYMS_SYMTAB}, {SHT_DYNSYM, MP_ELF_SYMS_DYNSYM}};
    mp_elf_status last = MP_ELF_E_NOSYMS;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        if (!(sources & (1u << order[k].source)))
            continue;
        for (uint64_t i = 0; i < shnum; i++) {
            Elf64_Shdr sh;
            get_shdr(data, shoff, i, &sh);
            if (sh.sh_type != order[k].type)
                continue;
            mp_elf_status st = read_symsec(data, size, shoff, shnum, &sh, out);
            if (st == MP_ELF_OK) {
                out->source = order[k].source;
                return MP_ELF_OK;
            }
            if (st == MP_ELF_E_NOMEM)
                return st;
            if (st == MP_ELF_E_FORMAT)
                last = st;
        }
    }
    return last;
}

mp_elf_status mp_elf_read_symbols(const uint8_t *data, size_t size, mp_elf_symtab *out)
{
    return read_symbols(data, size, MP_ELF_FROM_SYMTAB | MP_ELF_FROM_DYNSYM, out);
}

mp_elf_status mp_elf_read_symbols_file(const char *path, const char *expect_build_id,
                                       unsigned sources, mp_elf_symtab *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return MP_ELF_E_IO;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return MP_ELF_E_IO;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return MP_ELF_E_IO;
    mp_elf_status s;
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    char hex[2 * MP_ELF_BUILD_ID_MAX + 1];
    size_t idlen = mp_elf_file_build_id(map, size, id);
    mp_elf_hex(id, idlen, hex);
    if (expect_build_id != NULL && expect_build_id[0] != '\0' && idlen != 0 &&
        strcmp(hex, expect_build_id) != 0)
        s = MP_ELF_E_MISMATCH;
    else
        s = read_symbols(map, size, sources, out);
    munmap(map, size);
    return s;
}

bool mp_elf_segment_vaddr(const uint8_t *data, size_t size, uint64_t file_offset, uint64_t page,
                          uint64_t *vaddr)
{
    Elf64_Ehdr eh;
    if (size < sizeof eh || page == 0 || (page & (page - 1)) != 0)
        return false;
    memcpy(&eh, data, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
        (size - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum)
        return false;
    for (uint16_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, data + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && (ph.p_offset & ~(page - 1)) == file_offset) {
            *vaddr = ph.p_vaddr & ~(page - 1);
            return true;
        }
    }
    return false;
}

bool mp_elf_file_segment_vaddr(const char *path, uint64_t file_offset, uint64_t *vaddr)
{
    /* The headers only: the ELF header and the program headers that
     * follow it, within the first 8 KiB of every object linkers make. */
    uint8_t buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    close(fd);
    long page = sysconf(_SC_PAGESIZE);
    return n > 0 && page > 0 &&
           mp_elf_segment_vaddr(buf, (size_t)n, file_offset, (uint64_t)page, vaddr);
}

void mp_elf_symtab_free(mp_elf_symtab *t)
{
    if (t == NULL)
        return;
    free(t->syms);
    free(t->names);
    memset(t, 0, sizeof *t);
}

const mp_elf_sym *mp_elf_symtab_lookup(const mp_elf_symtab *t, uint64_t addr)
{
    if (t == NULL || t->count == 0 || addr < t->syms[0].addr)
        return NULL;
    size_t lo = 0, hi = t->count; /* last index with syms[i].addr <= addr */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->syms[mid].addr <= addr)
            lo = mid;
        else
            hi = mid;
    }
    const mp_elf_sym *s = &t->syms[lo];
    if (s->size != 0 && addr - s->addr >= s->size)
        return NULL;
    return s;
}

size_t mp_elf_symtab_bytes(const mp_elf_symtab *t)
{
    return t == NULL ? 0 : t->count * sizeof *t->syms + t->names_len;
}

void mp_elf_hex(const uint8_t *id, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * len] = '\0';
}
