/* SPDX-License-Identifier: MIT */
/* The ELF reader: build-ids (file, loaded image, readelf agree), symbol
 * tables (.symtab, .dynsym fallback), and robustness to malformed files. */
#include <criterion/criterion.h>
#include <elf.h>
#include <link.h>
#include <mimprof/image.h>

#include "elf_reader.h"
#include "maps.h"
#include "sites.h"
#include "util.h"

#define ALL (MP_ELF_FROM_SYMTAB | MP_ELF_FROM_DYNSYM)

static char *self_path(void)
{
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    return exe;
}

Test(report_elf, build_id_file_image_readelf_agree)
{
    size_t len = 0;
    uint8_t *data = ut_read(self_path(), &len);
    cr_assert_not_null(data);
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    size_t n = mp_elf_file_build_id(data, len, id);
    cr_assert_gt(n, 0);
    char hex[2 * MP_ELF_BUILD_ID_MAX + 1];
    mp_elf_hex(id, n, hex);
    /* the loaded image's note, read by the image library's module scan */
    mp_img_modules *mods;
    cr_assert_eq(mp_img_modules_load(&mods), MP_IMG_OK);
    const mp_img_module *prog = mp_img_modules_at(mods, 0);
    cr_assert(prog != NULL && prog->is_main);
    cr_assert_eq(prog->build_id_len, n);
    cr_assert_arr_eq(prog->build_id, id, n);
    mp_img_modules_free(mods);
    int st;
    char *o = ut_run(&st, "'%s' -n '%s' | sed -n 's/.*Build ID: *\\([0-9a-f]*\\).*/\\1/p'", READELF,
                     self_path());
    o[strcspn(o, "\n")] = '\0';
    cr_assert_str_eq(hex, o);
    free(o);
    free(data);
}

static uintptr_t main_base(void)
{
    mp_maps m;
    mp_maps_init(&m);
    cr_assert(mp_maps_refresh(&m));
    uintptr_t b = m.objs[0]->base;
    cr_assert(m.objs[0]->is_main);
    mp_maps_destroy(&m);
    return b;
}

Test(report_elf, symtab_names_own_functions)
{
    mp_elf_symtab t;
    cr_assert_eq(mp_elf_read_symbols_file(self_path(), "", ALL, &t), MP_ELF_OK);
    cr_assert_eq(t.source, MP_ELF_SYMS_SYMTAB);
    report_site_alpha();
    const mp_elf_sym *s = mp_elf_symtab_lookup(&t, sites_pc - 1 - main_base());
    cr_assert_not_null(s);
    cr_assert_str_eq(t.names + s->name, "report_site_alpha");
    /* The function's first byte is in it; an address before the first
     * symbol is not. */
    s = mp_elf_symtab_lookup(&t, (uintptr_t)&report_outer_gamma - main_base());
    cr_assert_not_null(s);
    cr_assert_str_eq(t.names + s->name, "report_outer_gamma");
    cr_assert_null(mp_elf_symtab_lookup(&t, 0));
    cr_assert_gt(mp_elf_symtab_bytes(&t), 0);
    for (size_t i = 1; i < t.count; i++)
        cr_assert_lt(t.syms[i - 1].addr, t.syms[i].addr, "sorted, one per address");
    mp_elf_symtab_free(&t);
    /* A file whose build-id differs from the loaded image's is refused. */
    cr_assert_eq(mp_elf_read_symbols_file(self_path(), "00112233", ALL, &t), MP_ELF_E_MISMATCH);
    cr_assert_eq(mp_elf_read_symbols_file("/nonexistent/file", "", ALL, &t), MP_ELF_E_IO);
    cr_assert_eq(mp_elf_read_symbols_file("/proc/self/maps", "", ALL, &t), MP_ELF_E_IO);
}

Test(report_elf, dynsym_fallback_on_stripped_file)
{
    mp_elf_symtab t;
    cr_assert_eq(mp_elf_read_symbols_file(PROBE_STRIPPED_PATH, "", ALL, &t), MP_ELF_OK);
    cr_assert_eq(t.source, MP_ELF_SYMS_DYNSYM);
    bool found = false, hook = false;
    for (size_t i = 0; i < t.count; i++) {
        found = found || strcmp(t.names + t.syms[i].name, "report_site_alpha") == 0;
        hook = hook || strcmp(t.names + t.syms[i].name, "mp_prof_sample_hook") == 0;
    }
    cr_assert(found, "the exported function is in .dynsym");
    cr_assert_not(hook, "an unexported one is not");
    mp_elf_symtab_free(&t);
    /* Asked for .symtab only, a stripped file has none. */
    cr_assert_eq(mp_elf_read_symbols_file(PROBE_STRIPPED_PATH, "", MP_ELF_FROM_SYMTAB, &t),
                 MP_ELF_E_NOSYMS);
    cr_assert_eq(t.count, 0);
}

/* The reference the reader's sort must agree with: every defined, named
 * function symbol of section type `type`, ordered by (address, binding
 * global < weak < local, a known size first, name offset), the first of
 * each address kept (qsort, written for clarity, not speed). */
typedef struct ref_sym {
    uint64_t addr, size;
    uint32_t name;
    int rank;
} ref_sym;

static int ref_cmp(const void *a, const void *b)
{
    const ref_sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    if ((x->size != 0) != (y->size != 0))
        return x->size != 0 ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static void expect_reference_order(const char *path, uint32_t type)
{
    size_t len = 0;
    uint8_t *d = ut_read(path, &len);
    cr_assert_not_null(d, "%s", path);
    Elf64_Ehdr eh;
    memcpy(&eh, d, sizeof eh);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(d + eh.e_shoff);
    size_t k = 0;
    while (k < eh.e_shnum && sh[k].sh_type != type)
        k++;
    cr_assert_lt(k, eh.e_shnum, "%s has the section", path);
    const Elf64_Sym *sym = (const Elf64_Sym *)(d + sh[k].sh_offset);
    const char *str = (const char *)d + sh[sh[k].sh_link].sh_offset;
    size_t nsym = sh[k].sh_size / sizeof *sym, n = 0;
    ref_sym *r = malloc(nsym * sizeof *r);
    for (size_t i = 0; i < nsym; i++) {
        unsigned t = ELF64_ST_TYPE(sym[i].st_info), b = ELF64_ST_BIND(sym[i].st_info);
        if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym[i].st_shndx == SHN_UNDEF ||
            sym[i].st_value == 0 || sym[i].st_name == 0 || str[sym[i].st_name] == '\0')
            continue;
        r[n++] = (ref_sym){sym[i].st_value, sym[i].st_size, sym[i].st_name,
                           b == STB_GLOBAL ? 0
                           : b == STB_WEAK ? 1
                                           : 2};
    }
    qsort(r, n, sizeof *r, ref_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || r[m - 1].addr != r[i].addr)
            r[m++] = r[i];

    mp_elf_symtab t;
    unsigned from = type == SHT_SYMTAB ? MP_ELF_FROM_SYMTAB : MP_ELF_FROM_DYNSYM;
    cr_assert_eq(mp_elf_read_symbols_file(path, "", from, &t), MP_ELF_OK, "%s", path);
    cr_assert_eq(t.count, m, "%s: one symbol per address", path);
    for (size_t i = 0; i < m; i++) {
        cr_assert_eq(t.syms[i].addr, r[i].addr, "%s: symbol %zu", path, i);
        cr_assert_eq(t.syms[i].size, r[i].size, "%s: symbol %zu", path, i);
        size_t l = strcspn(t.names + t.syms[i].name, "@");
        cr_assert(strncmp(t.names + t.syms[i].name, str + r[i].name, l) == 0, "%s: %s vs %s", path,
                  t.names + t.syms[i].name, str + r[i].name);
    }
    mp_elf_symtab_free(&t);
    free(r);
    free(d);
}

/* The reader's address sort picks, at every address, the symbol the
 * reference order does: on this test's own .symtab, on libc's .dynsym
 * (thousands of functions, many aliases at one address: weak and global
 * names of one function) and on libc's separate debug file when one is
 * installed (Debian's libc6-dbg: ~7,000 functions, local ones too). */
Test(report_elf, symbols_sorted_as_the_reference_order_sorts_them)
{
    expect_reference_order(self_path(), SHT_SYMTAB);
    char libc[4096];
    int st;
    char *o = ut_run(&st, "ldd '%s' | sed -n 's/.*libc.so.6 => \\([^ ]*\\).*/\\1/p'", self_path());
    o[strcspn(o, "\n")] = '\0';
    cr_assert(realpath(o, libc) != NULL, "libc at '%s'", o);
    free(o);
    expect_reference_order(libc, SHT_DYNSYM);
    size_t len = 0;
    uint8_t *d = ut_read(libc, &len);
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    char hex[2 * MP_ELF_BUILD_ID_MAX + 1], dbg[4200];
    mp_elf_hex(id, mp_elf_file_build_id(d, len, id), hex);
    free(d);
    snprintf(dbg, sizeof dbg, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
    if (access(dbg, R_OK) == 0)
        expect_reference_order(dbg, SHT_SYMTAB);
}

/* glibc's .symtab spells versioned definitions "name@@VERSION"; the
 * function is "name", as .dynsym and every symbolizer spell it. */
Test(report_elf, symbol_versions_are_not_part_of_the_name)
{
    mp_elf_symtab t;
    cr_assert_eq(mp_elf_read_symbols_file(VERSIONED_PATH, "", ALL, &t), MP_ELF_OK);
    cr_assert_eq(t.source, MP_ELF_SYMS_SYMTAB);
    bool found = false;
    for (size_t i = 0; i < t.count; i++) {
        const char *name = t.names + t.syms[i].name;
        cr_assert_null(strchr(name, '@'), "%s", name);
        found = found || strcmp(name, "mp_report_versioned") == 0;
    }
    cr_assert(found, "the versioned definition is named without its version");
    mp_elf_symtab_free(&t);
}

/* Every parser entry point on `data`: must not crash or read outside. */
static void parse_all(const uint8_t *data, size_t len)
{
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    mp_elf_symtab t;
    (void)mp_elf_file_build_id(data, len, id);
    if (mp_elf_read_symbols(data, len, &t) == MP_ELF_OK) {
        for (size_t i = 0; i < t.count; i++)
            cr_assert_lt(t.syms[i].name, t.names_len);
        (void)mp_elf_symtab_lookup(&t, 0x1234);
        mp_elf_symtab_free(&t);
    }
    (void)mp_elf_notes_build_id(data, len, 4, id);
    (void)mp_elf_notes_build_id(data, len, 8, id);
}

/* Copies into an exactly sized heap block, so ASan sees any overread. */
static void parse_copy(const uint8_t *data, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    memcpy(c, data, len);
    parse_all(c, len);
    free(c);
}

Test(report_elf, malformed_files_are_refused_safely, .timeout = 120)
{
    size_t len = 0;
    uint8_t *data = ut_read(self_path(), &len);
    cr_assert_not_null(data);
    /* Truncations, including inside the headers and tables. */
    for (size_t n = 0; n < 256 && n < len; n++)
        parse_copy(data, n);
    for (size_t n = 256; n < len; n += len / 61 + 1)
        parse_copy(data, n);
    /* Hostile header fields. */
    Elf64_Ehdr eh;
    memcpy(&eh, data, sizeof eh);
    uint8_t *m = malloc(len);
    static const uint64_t bad[] = {0, 1, 0x7fffffff, 0xffffffff, UINT64_MAX, UINT64_MAX - 63};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Elf64_Ehdr e = eh;
        memcpy(m, data, len);
        e.e_shoff = bad[i];
        memcpy(m, &e, sizeof e);
        parse_all(m, len);
        e = eh;
        e.e_phoff = bad[i];
        e.e_phnum = 0xffff;
        memcpy(m, &e, sizeof e);
        parse_all(m, len);
        e = eh;
        e.e_shnum = 0;
        memcpy(m, &e, sizeof e);
        parse_all(m, len);
        /* Every section header's offset/size/link/entsize corrupted. */
        for (size_t s = 0; s < eh.e_shnum; s++) {
            memcpy(m, data, len);
            Elf64_Shdr sh;
            size_t at = eh.e_shoff + s * sizeof sh;
            memcpy(&sh, m + at, sizeof sh);
            Elf64_Shdr v = sh;
            v.sh_offset = bad[i];
            memcpy(m + at, &v, sizeof v);
            parse_all(m, len);
            v = sh;
            v.sh_size = bad[i];
            memcpy(m + at, &v, sizeof v);
            parse_all(m, len);
            v = sh;
            v.sh_link = (uint32_t)bad[i];
            v.sh_entsize = bad[i];
            memcpy(m + at, &v, sizeof v);
            parse_all(m, len);
        }
    }
    /* Random byte flips, fixed seed. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int round = 0; round < 300; round++) {
        memcpy(m, data, len);
        for (int k = 0; k < 16; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t at = (size_t)(x % (k < 8 ? 4096 : len));
            m[at] ^= (uint8_t)(x >> 32);
        }
        parse_all(m, len);
    }
    free(m);
    free(data);
}

Test(report_elf, notes_parser_bounds)
{
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    /* A valid GNU build-id note after a foreign one. */
    uint8_t buf[64] = {0};
    uint32_t h1[3] = {4, 4, 1};
    memcpy(buf, h1, 12);
    memcpy(buf + 12, "XYZ", 4);
    uint32_t h2[3] = {4, 8, NT_GNU_BUILD_ID};
    memcpy(buf + 20, h2, 12);
    memcpy(buf + 32, "GNU", 4);
    memcpy(buf + 36, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    cr_assert_eq(mp_elf_notes_build_id(buf, 44, 4, id), 8);
    cr_assert_eq(id[0], 1);
    cr_assert_eq(id[7], 8);
    char hex[17];
    mp_elf_hex(id, 8, hex);
    cr_assert_str_eq(hex, "0102030405060708");
    /* One byte short: nothing. */
    cr_assert_eq(mp_elf_notes_build_id(buf, 43, 4, id), 0);
    /* Sizes that overflow. */
    uint32_t h3[3] = {0xfffffffc, 0xffffffff, NT_GNU_BUILD_ID};
    memcpy(buf, h3, 12);
    cr_assert_eq(mp_elf_notes_build_id(buf, sizeof buf, 4, id), 0);
    cr_assert_eq(mp_elf_notes_build_id(buf, sizeof buf, 8, id), 0);
    cr_assert_eq(mp_elf_notes_build_id(NULL, 10, 4, id), 0);
    /* A very long id is cut at MP_ELF_BUILD_ID_MAX. */
    uint8_t big[12 + 4 + 100] = {0};
    uint32_t h4[3] = {4, 100, NT_GNU_BUILD_ID};
    memcpy(big, h4, 12);
    memcpy(big + 12, "GNU", 4);
    cr_assert_eq(mp_elf_notes_build_id(big, sizeof big, 4, id), MP_ELF_BUILD_ID_MAX);
    /* Not ELF. */
    mp_elf_symtab t;
    cr_assert_eq(mp_elf_read_symbols((const uint8_t *)"\x7f"
                                                      "ELF",
                                     4, &t),
                 MP_ELF_E_FORMAT);
    cr_assert_eq(mp_elf_read_symbols(NULL, 0, &t), MP_ELF_E_FORMAT);
}

/* A segment's address from its program header, not from its offset: lld
 * (Rust's default linker) puts text at an address 0x1000 past its offset,
 * and a load bias taken as start - offset named every frame of such a
 * binary after the wrong function. */
Test(report_elf, segment_vaddr_from_program_headers)
{
    uint8_t buf[sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr)] = {0};
    Elf64_Ehdr eh = {.e_phoff = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = 3};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    Elf64_Phdr ph[3] = {
        {.p_type = PT_LOAD, .p_offset = 0, .p_vaddr = 0},
        {.p_type = PT_LOAD, .p_offset = 0x1f2a0, .p_vaddr = 0x202a0},
        {.p_type = PT_NOTE, .p_offset = 0x3000, .p_vaddr = 0x9000},
    };
    memcpy(buf, &eh, sizeof eh);
    memcpy(buf + sizeof eh, ph, sizeof ph);
    uint64_t v = 1;
    cr_assert(mp_elf_segment_vaddr(buf, sizeof buf, 0, 4096, &v));
    cr_assert_eq(v, 0);
    cr_assert(mp_elf_segment_vaddr(buf, sizeof buf, 0x1f000, 4096, &v));
    cr_assert_eq(v, 0x20000, "vaddr 0x%lx", (unsigned long)v);
    cr_assert_not(mp_elf_segment_vaddr(buf, sizeof buf, 0x3000, 4096, &v), "not a PT_LOAD");
    cr_assert_not(mp_elf_segment_vaddr(buf, sizeof buf, 0x5000, 4096, &v), "no such segment");
    cr_assert_not(mp_elf_segment_vaddr(buf, sizeof buf - 1, 0, 4096, &v), "headers cut short");
    buf[0] = 0;
    cr_assert_not(mp_elf_segment_vaddr(buf, sizeof buf, 0, 4096, &v), "not ELF");
}

/* This test binary's own executable segment, read from the file, agrees
 * with where the loader put it. */
static int text_of_main(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name[0] != '\0')
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
            ((uint64_t *)arg)[0] = info->dlpi_phdr[i].p_offset & ~4095ull;
            ((uint64_t *)arg)[1] = info->dlpi_phdr[i].p_vaddr & ~4095ull;
            return 1;
        }
    return 0;
}

Test(report_elf, file_segment_vaddr_agrees_with_the_loader)
{
    uint64_t seg[2] = {UINT64_MAX, UINT64_MAX}, v = 0;
    cr_assert_eq(dl_iterate_phdr(text_of_main, seg), 1);
    cr_assert(mp_elf_file_segment_vaddr(self_path(), seg[0], &v));
    cr_assert_eq(v, seg[1]);
    cr_assert_not(mp_elf_file_segment_vaddr("/nonexistent/file", 0, &v));
}
