/* SPDX-License-Identifier: MIT */
/* Functions, files and lines from DWARF through libdw (syms_state.h):
 * offline debug-file lookup, the unit of an address, the chain of inlined
 * scopes, and the naming of each frame (linkage name demangled, else the
 * name qualified by its enclosing scopes). Built with the `libdw` feature.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "demangle.h"
#include "syms_state.h"

#if MP_HAVE_LIBDW
#include <dwarf.h>

/* Separate debug info, offline only: /usr/lib/debug/.build-id and the
 * .gnu_debuglink places. (dwfl_standard_find_debuginfo may query a
 * debuginfod server over the network; a profiler must not.) */
/* Every descriptor handed to libdw is opened here, close-on-exec and at
 * out of the program's numbers (mp_prof_fd_open, also when the program
 * holds all of them): libdw keeps it for as long as
 * the module's DWARF is cached, i.e. for the process's life, and would
 * otherwise open it itself at the lowest free number without
 * close-on-exec, where the program and every program it executes would
 * find it. */
static int open_high(const char *path) { return mp_prof_fd_open(path, O_RDONLY, 0); }

static int try_open(const char *path, char **name)
{
    int fd = open_high(path);
    if (fd >= 0) {
        *name = strdup(path);
        if (*name == NULL) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

static int offline_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                                  GElf_Addr base, const char *file_name, const char *debuglink_file,
                                  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)userdata;
    (void)modname;
    (void)base;
    (void)debuglink_crc;
    char path[4096];
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (n > 1 && n <= MP_ELF_BUILD_ID_MAX) {
        char hex[2 * MP_ELF_BUILD_ID_MAX + 1];
        mp_elf_hex(bits, (size_t)n, hex);
        snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", mp_syms_debug_root(), hex,
                 hex + 2);
        int fd = try_open(path, debuginfo_file_name);
        if (fd >= 0)
            return fd;
    }
    if (debuglink_file != NULL && file_name != NULL && strchr(debuglink_file, '/') == NULL) {
        const char *slash = strrchr(file_name, '/');
        int dirlen = slash ? (int)(slash - file_name) : 0;
        /* DIR/LINK, DIR/.debug/LINK, ROOT/DIR/LINK */
        const char *pre[3] = {"", "", mp_syms_debug_root()}, *mid[3] = {"/", "/.debug/", "/"};
        for (int i = 0; i < 3; i++) {
            int len = snprintf(path, sizeof path, "%s%.*s%s%s", pre[i], dirlen, file_name, mid[i],
                               debuglink_file);
            if (len <= 0 || (size_t)len >= sizeof path || strcmp(path, file_name) == 0)
                continue;
            int fd = try_open(path, debuginfo_file_name);
            if (fd >= 0)
                return fd;
        }
    }
    return -1;
}

static char *no_path = NULL;
static const Dwfl_Callbacks dwfl_cbs = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = offline_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &no_path,
};

/* The object's file reported to libdw through a descriptor of ours
 * (open_high). On success libdw owns the descriptor and closes it at
 * dwfl_end; on failure it may or may not have closed it, so it is closed
 * here only if it still is the file opened. */
static Dwfl_Module *report_file(Dwfl *dwfl, const mp_obj *o)
{
    int fd = open_high(mp_syms_file(o));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    Dwfl_Module *mod = dwfl_report_elf(dwfl, o->path, mp_syms_file(o), fd, o->base, true);
    struct stat now;
    if (mod == NULL && fstat(fd, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
        close(fd);
    return mod;
}

static Dwfl_Module *obj_module(mp_syms *s, mp_obj *o)
{
    struct mp_obj_syms *os = mp_syms_of_obj(o);
    if (os == NULL || !o->has_file)
        return NULL;
    if (!os->dwfl_tried) {
        os->dwfl_tried = true;
        os->dwfl = dwfl_begin(&dwfl_cbs);
        if (os->dwfl == NULL)
            return NULL;
        s->dwfl_count++;
        dwfl_report_begin(os->dwfl);
        os->mod = report_file(os->dwfl, o);
        dwfl_report_end(os->dwfl, NULL, NULL);
        if (os->mod != NULL && o->build_id[0] != '\0') {
            /* A file replaced on disk since it was loaded is not used. */
            const unsigned char *bits = NULL;
            GElf_Addr vaddr;
            int n = dwfl_module_build_id(os->mod, &bits, &vaddr);
            char hex[2 * MP_ELF_BUILD_ID_MAX + 1];
            if (n > 0 && n <= MP_ELF_BUILD_ID_MAX) {
                mp_elf_hex(bits, (size_t)n, hex);
                if (strcmp(hex, o->build_id) != 0)
                    os->mod = NULL;
            }
        }
    }
    return os->mod;
}

static const char *die_name(Dwarf_Die *d)
{
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(d, DW_AT_name, &a) != NULL)
        return dwarf_formstring(&a);
    return NULL;
}

/* The linkage name of a function DIE: its own, or that of the abstract
 * instance (DW_AT_abstract_origin: inlined and out-of-line copies) or of
 * the declaration (DW_AT_specification: a member defined outside its
 * class), which dwarf_attr_integrate follows. */
static const char *die_linkage_name(Dwarf_Die *d)
{
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a) != NULL ||
        dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a) != NULL)
        return dwarf_formstring(&a);
    return NULL;
}

static bool cu_is_cxx(Dwarf_Die *cu)
{
    switch (dwarf_srclang(cu)) {
    case DW_LANG_C_plus_plus:
    case DW_LANG_C_plus_plus_03:
    case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
        return true;
    default:
        return false;
    }
}

/* A C++ function without a linkage name (the compiler emitted none):
 * `name` qualified by the namespaces, classes, structs and unions that
 * enclose the function's declaration (the DIE that DW_AT_abstract_origin
 * and DW_AT_specification lead to), outermost first, as the demangler
 * writes them. NULL when nothing encloses it. */
static const char *qualified_name(mp_syms *s, Dwarf_Die *d, const char *name)
{
    Dwarf_Die decl = *d, next;
    Dwarf_Attribute a;
    for (int hops = 0; hops < 8; hops++) {
        if (dwarf_formref_die(dwarf_attr(&decl, DW_AT_abstract_origin, &a), &next) == NULL &&
            dwarf_formref_die(dwarf_attr(&decl, DW_AT_specification, &a), &next) == NULL)
            break;
        decl = next;
    }
    Dwarf_Die *scopes = NULL;
    int n = dwarf_getscopes_die(&decl, &scopes);
    char buf[4096];
    size_t len = 0;
    bool any = false;
    for (int i = n - 1; i >= 1; i--) { /* scopes[0] is the function, scopes[n-1] the unit */
        const char *part;
        switch (dwarf_tag(&scopes[i])) {
        case DW_TAG_namespace:
            part = die_name(&scopes[i]);
            if (part == NULL)
                part = "(anonymous namespace)";
            break;
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
            part = die_name(&scopes[i]);
            break;
        default:
            part = NULL;
        }
        if (part == NULL)
            continue;
        int w = snprintf(buf + len, sizeof buf - len, "%s::", part);
        if (w < 0 || (size_t)w >= sizeof buf - len) {
            free(scopes);
            return NULL;
        }
        len += (size_t)w;
        any = true;
    }
    free(scopes);
    if (!any || snprintf(buf + len, sizeof buf - len, "%s", name) >= (int)(sizeof buf - len))
        return NULL;
    return mp_syms_intern(s, buf);
}

/* Names frame `f` after function DIE `d` of a unit (`cxx`: a C++ one).
 * `elf_sym`: for the physical frame, the ELF symbol containing the
 * address, which is that function's linkage name when the compiler wrote
 * none in DWARF (GCC omits it for lambdas' operator() and for functions
 * in anonymous namespaces, rustc none at all with line-tables-only);
 * NULL for inlined frames. */
static void name_die(mp_syms *s, mp_frame *f, Dwarf_Die *d, bool cxx, const char *elf_sym)
{
    const char *sys = mp_syms_intern(s, die_linkage_name(d));
    /* Any language: rustc writes no linkage name with debug =
     * "line-tables-only" (its DW_AT_name is the short `main`,
     * `{closure#0}`), GCC none for lambdas; the physical frame is the
     * ELF symbol's function, whose mangled name is the qualified one. */
    if (sys == NULL && mp_demangle_looks_mangled(elf_sym))
        sys = elf_sym;
    if (sys != NULL) {
        mp_syms_set_name(s, f, sys);
        return;
    }
    const char *name = die_name(d);
    f->func = mp_syms_intern(s, name);
    f->sysname = NULL;
    if (cxx && name != NULL) {
        const char *q = qualified_name(s, d, name);
        if (q != NULL)
            f->func = q;
    }
}

/* `file` made absolute against the unit's compilation directory and
 * lexically normalized ("a/b/../c" -> "a/c"), interned. */
static const char *abs_file(mp_syms *s, const char *comp_dir, const char *file)
{
    if (file == NULL)
        return NULL;
    char buf[4096];
    int n;
    if (file[0] != '/' && comp_dir != NULL && comp_dir[0] != '\0')
        n = snprintf(buf, sizeof buf, "%s/%s", comp_dir, file);
    else
        n = snprintf(buf, sizeof buf, "%s", file);
    if (n < 0 || (size_t)n >= sizeof buf)
        return mp_syms_intern(s, file);
    /* Normalize in place: drop "." and "" segments, resolve "..". */
    char out[4096];
    size_t o = 0;
    bool absolute = buf[0] == '/';
    size_t segs[512];
    size_t nseg = 0;
    char *save = NULL;
    for (char *seg = strtok_r(buf, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (strcmp(seg, ".") == 0)
            continue;
        if (strcmp(seg, "..") == 0 && nseg > 0) {
            size_t prev = segs[nseg - 1];
            if (strcmp(out + prev + (prev > 0 || absolute ? 1 : 0), "..") != 0) {
                o = prev;
                out[o] = '\0';
                nseg--;
                continue;
            }
        }
        if (nseg == sizeof segs / sizeof segs[0])
            return mp_syms_intern(s, file);
        segs[nseg++] = o;
        int w = snprintf(out + o, sizeof out - o, "%s%s", (o > 0 || absolute) ? "/" : "", seg);
        if (w < 0 || (size_t)w >= sizeof out - o)
            return mp_syms_intern(s, file);
        o += (size_t)w;
    }
    if (o == 0)
        snprintf(out, sizeof out, "%s", absolute ? "/" : ".");
    return mp_syms_intern(s, out);
}

static int cu_cmp(const void *a, const void *b)
{
    const cu_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

static void build_cus(mp_syms *s, struct mp_obj_syms *os)
{
    os->cus_built = true;
    size_t cap = 0;
    Dwarf_Die *cu = NULL;
    Dwarf_Addr bias = 0;
    while ((cu = dwfl_module_nextcu(os->mod, cu, &bias)) != NULL) {
        ptrdiff_t off = 0;
        Dwarf_Addr base, lo, hi;
        while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
            if (hi <= lo)
                continue;
            if (os->ncus == cap) {
                size_t nc = cap ? cap * 2 : 64;
                cu_range *n = realloc(os->cus, nc * sizeof *n);
                if (n == NULL)
                    goto done;
                os->cus = n;
                cap = nc;
            }
            os->cus[os->ncus].lo = lo + bias;
            os->cus[os->ncus].hi = hi + bias;
            os->cus[os->ncus].die = *cu;
            os->ncus++;
        }
    }
done:
    if (os->ncus > 1)
        qsort(os->cus, os->ncus, sizeof *os->cus, cu_cmp);
    os->bias = bias;
    s->symtab_bytes += os->ncus * sizeof *os->cus;
}

/* The compilation unit containing `addr`, through .debug_aranges, else
 * through the units' own ranges. */
static Dwarf_Die *find_cu(mp_syms *s, struct mp_obj_syms *os, Dwarf_Addr addr, Dwarf_Addr *bias)
{
    Dwarf_Die *cu = dwfl_module_addrdie(os->mod, addr, bias);
    if (cu != NULL)
        return cu;
    if (!os->cus_built)
        build_cus(s, os);
    size_t lo = 0, hi = os->ncus;
    while (lo < hi) { /* first range with lo > addr */
        size_t mid = lo + (hi - lo) / 2;
        if (os->cus[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) { /* ranges may nest or overlap: look back a little */
        if (addr < os->cus[i].hi) {
            *bias = os->bias;
            return &os->cus[i].die;
        }
        if (lo - i > 8)
            break;
    }
    return NULL;
}

/* Deepest DIE chain pc_path records (functions, inlined instances,
 * lexical blocks). */
#define MP_DWARF_MAX_DEPTH 128

/* Whether a DIE without code of its own may hold DIEs with code: Rust's
 * modules are namespaces, and its concrete functions sit inside them, as
 * C++ methods may sit inside their class. */
static bool holds_code(int tag)
{
    return tag == DW_TAG_namespace || tag == DW_TAG_module || tag == DW_TAG_class_type ||
           tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

/* Appends to path (*n of them so far) the DIEs under `parent` whose
 * ranges hold pc, outermost first, descending through the containers
 * above; true when one was found. dwarf_getscopes() does this walk, but
 * for functions after an inlined instance with an empty range (rustc's
 * core::hint::black_box: low_pc == high_pc) it finds nothing, where
 * `addr2line -i` finds the whole chain. */
static bool pc_path(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *path, int *n)
{
    Dwarf_Die c;
    if (*n >= MP_DWARF_MAX_DEPTH || dwarf_child(parent, &c) != 0)
        return false;
    do {
        if (dwarf_haspc(&c, pc) == 1) {
            path[(*n)++] = c;
            (void)pc_path(&path[*n - 1], pc, path, n);
            return true;
        }
        if (!dwarf_hasattr(&c, DW_AT_low_pc) && !dwarf_hasattr(&c, DW_AT_ranges) &&
            holds_code(dwarf_tag(&c)) && pc_path(&c, pc, path, n))
            return true;
    } while (dwarf_siblingof(&c, &c) == 0);
    return false;
}

int mp_syms_dwarf_frames(mp_syms *s, mp_obj *o, uintptr_t addr, mp_frame *fr, uint8_t *flags)
{
    Dwfl_Module *mod = obj_module(s, o);
    if (mod == NULL)
        return -1;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = find_cu(s, o->syms, addr, &bias);
    if (cu == NULL)
        return -1;
    Dwarf_Attribute cda;
    const char *comp_dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &cda));
    const char *file = NULL;
    int line = 0;
    Dwarf_Line *l = dwarf_getsrc_die(cu, addr - bias);
    if (l != NULL) {
        file = dwarf_linesrc(l, NULL, NULL);
        if (file == NULL || dwarf_lineno(l, &line) != 0)
            line = 0;
    }
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    bool have_files = dwarf_getsrcfiles(cu, &files, &nfiles) == 0;
    /* The DIEs whose ranges hold addr, from the unit down to the
     * innermost (an inlined instance sits inside its caller). */
    Dwarf_Die path[MP_DWARF_MAX_DEPTH];
    int np = 0;
    (void)pc_path(cu, addr - bias, path, &np);
    bool cxx = cu_is_cxx(cu);
    int k = 0;
    for (int j = np; j-- > 0 && k < MP_SYMS_MAX_INLINE;) {
        Dwarf_Die *d = &path[j];
        int tag = dwarf_tag(d);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        name_die(s, &fr[k], d, cxx, tag == DW_TAG_subprogram ? mp_syms_elf_name(s, o, addr) : NULL);
        fr[k].file = abs_file(s, comp_dir, file);
        fr[k].line = line > 0 ? line : 0;
        k++;
        if (tag == DW_TAG_subprogram)
            break;
        /* The caller's position is the inlined call site. */
        Dwarf_Attribute a;
        Dwarf_Word v;
        file = NULL;
        line = 0;
        if (have_files && dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &v) == 0 &&
            v < nfiles)
            file = dwarf_filesrc(files, v, NULL, NULL);
        if (dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &v) == 0 && v < INT32_MAX)
            line = (int)v;
    }
    if (np > 0)
        *flags |= MP_PC_INLINE;
    if (k == 0) { /* a unit without a function scope here: line table only */
        fr[0].func = NULL;
        fr[0].sysname = NULL;
        fr[0].file = abs_file(s, comp_dir, file);
        fr[0].line = line > 0 ? line : 0;
        k = 1;
    }
    /* The outermost frame without a DWARF name takes the ELF symbol's. */
    if (fr[k - 1].func == NULL)
        mp_syms_set_name(s, &fr[k - 1], mp_syms_elf_name(s, o, addr));
    return k;
}
void mp_syms_dwarf_forget(mp_syms *s, struct mp_obj_syms *os)
{
    if (os->dwfl) {
        dwfl_end(os->dwfl);
        if (s != NULL)
            s->dwfl_count--;
    }
    if (s != NULL)
        s->symtab_bytes -= os->ncus * sizeof *os->cus;
    free(os->cus);
}
#endif
