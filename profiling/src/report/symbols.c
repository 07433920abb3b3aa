/* Report-time symbolization (see symbols.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "symbols.h"

#include "../platform/platform.h"
#include "demangle.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if MP_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

/* ---- a bump arena: strings, frames and entries never move ---- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

typedef struct arena {
    chunk *head;
    size_t bytes;
} arena;

static void *arena_alloc(arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    if (a->head == NULL || a->head->cap - a->head->used < n) {
        size_t cap = n > 60000 ? n : 60000;
        chunk *c = malloc(sizeof *c + cap);
        if (c == NULL)
            return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->bytes += sizeof *c + cap;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_clear(arena *a)
{
    chunk *c = a->head;
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->bytes = 0;
}

/* ---- per-object symbol state ---- */

struct mp_obj_syms {
    bool symtab_tried;
    mp_elf_symtab symtab;
#if MP_HAVE_LIBDW
    bool dwfl_tried;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    Dwarf_Addr bias;
    /* Units by address range, built from the units themselves when the
     * object has no .debug_aranges (clang does not emit it by default and
     * libdw 0.188 then finds no unit by address). */
    bool cus_built;
    struct cu_range *cus;
    size_t ncus;
#endif
};

#if MP_HAVE_LIBDW
typedef struct cu_range {
    Dwarf_Addr lo, hi; /* [lo, hi) in the module's (biased) addresses */
    Dwarf_Die die;
} cu_range;
#endif

/* An interned linkage name and its interned human name. */
typedef struct human_slot {
    const char *sys, *human;
} human_slot;

struct mp_syms {
    arena mem;         /* pc entries, frames, strings */
    const char **strs; /* interned strings (open addressing) */
    size_t nstrs, strs_cap;
    human_slot *humans; /* demangled names by linkage name (open addressing on the pointer) */
    size_t nhumans, humans_cap;
    mp_pcinfo **pcs; /* pc cache (open addressing on addr) */
    size_t npcs, pcs_cap;
    size_t symtab_bytes; /* sum over objects' symbol tables */
    size_t dwfl_count;   /* open DWARF sessions */
};

bool mp_syms_have_lines(void)
{
#if MP_HAVE_LIBDW
    return true;
#else
    return false;
#endif
}

mp_syms *mp_syms_new(void) { return calloc(1, sizeof(mp_syms)); }

void mp_syms_clear_addresses(mp_syms *s)
{
    arena_clear(&s->mem);
    free(s->strs);
    free(s->pcs);
    free(s->humans);
    s->strs = NULL;
    s->pcs = NULL;
    s->humans = NULL;
    s->nstrs = s->strs_cap = s->npcs = s->pcs_cap = s->nhumans = s->humans_cap = 0;
}

void mp_syms_free(mp_syms *s)
{
    if (s == NULL)
        return;
    mp_syms_clear_addresses(s);
    free(s);
}

void mp_syms_forget_obj(mp_syms *s, mp_obj *o)
{
    struct mp_obj_syms *os = o->syms;
    if (os == NULL)
        return;
    if (s != NULL)
        s->symtab_bytes -= mp_elf_symtab_bytes(&os->symtab);
    mp_elf_symtab_free(&os->symtab);
#if MP_HAVE_LIBDW
    if (os->dwfl) {
        dwfl_end(os->dwfl);
        if (s != NULL)
            s->dwfl_count--;
    }
    if (s != NULL)
        s->symtab_bytes -= os->ncus * sizeof *os->cus;
    free(os->cus);
#endif
    free(os);
    o->syms = NULL;
}

size_t mp_syms_bytes(const mp_syms *s)
{
    if (s == NULL)
        return 0;
    return sizeof *s + s->mem.bytes + s->strs_cap * sizeof *s->strs + s->pcs_cap * sizeof *s->pcs +
           s->humans_cap * sizeof *s->humans + s->symtab_bytes;
}

void mp_syms_trim(mp_syms *s, mp_maps *m, size_t budget)
{
    if (mp_syms_bytes(s) <= budget)
        return;
    mp_syms_clear_addresses(s);
    for (size_t i = 0; i < m->nobjs && mp_syms_bytes(s) > budget; i++)
        mp_syms_forget_obj(s, m->objs[i]);
}

/* ---- interning ---- */

static uint64_t hash_str(const char *p)
{
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static bool grow_strs(mp_syms *s)
{
    size_t nc = s->strs_cap ? s->strs_cap * 2 : 1024;
    const char **t = calloc(nc, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < s->strs_cap; i++) {
        const char *v = s->strs[i];
        if (v == NULL)
            continue;
        size_t j = hash_str(v) & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = v;
    }
    free(s->strs);
    s->strs = t;
    s->strs_cap = nc;
    return true;
}

static const char *intern(mp_syms *s, const char *str)
{
    if (str == NULL || str[0] == '\0')
        return NULL;
    if ((s->nstrs + 1) * 2 > s->strs_cap && !grow_strs(s))
        return NULL;
    size_t j = hash_str(str) & (s->strs_cap - 1);
    while (s->strs[j]) {
        if (strcmp(s->strs[j], str) == 0)
            return s->strs[j];
        j = (j + 1) & (s->strs_cap - 1);
    }
    size_t len = strlen(str) + 1;
    char *copy = arena_alloc(&s->mem, len);
    if (copy == NULL)
        return NULL;
    memcpy(copy, str, len);
    s->strs[j] = copy;
    s->nstrs++;
    return copy;
}

/* ---- human names ---- */

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 31));
}

static human_slot *human_slot_of(mp_syms *s, const char *sys)
{
    size_t j = hash_ptr(sys) & (s->humans_cap - 1);
    while (s->humans[j].sys != NULL && s->humans[j].sys != sys)
        j = (j + 1) & (s->humans_cap - 1);
    return &s->humans[j];
}

static bool grow_humans(mp_syms *s)
{
    size_t nc = s->humans_cap ? s->humans_cap * 2 : 256;
    human_slot *old = s->humans;
    size_t oc = s->humans_cap;
    s->humans = calloc(nc, sizeof *s->humans);
    if (s->humans == NULL) {
        s->humans = old;
        return false;
    }
    s->humans_cap = nc;
    for (size_t i = 0; i < oc; i++)
        if (old[i].sys != NULL)
            *human_slot_of(s, old[i].sys) = old[i];
    free(old);
    return true;
}

/* Names frame `f` from the interned linkage name `sys`: func = its human
 * name, demangled once per distinct name (cached with the strings),
 * sysname = `sys` when the two differ. A name the demangler refuses, and
 * any C name, is its own human name. */
static void set_name(mp_syms *s, mp_frame *f, const char *sys)
{
    f->func = sys;
    f->sysname = NULL;
    if (sys == NULL || !mp_demangle_looks_mangled(sys))
        return;
    if ((s->nhumans + 1) * 2 > s->humans_cap && !grow_humans(s))
        return; /* out of memory: the linkage name serves */
    human_slot *h = human_slot_of(s, sys);
    if (h->sys == NULL) {
        char buf[8192];
        long n = mp_demangle(sys, buf, sizeof buf);
        h->sys = sys;
        h->human = n > 0 && (size_t)n < sizeof buf ? intern(s, buf) : NULL;
        s->nhumans++;
    }
    if (h->human != NULL && h->human != sys) {
        f->func = h->human;
        f->sysname = sys;
    }
}

/* ---- the pc cache ---- */

static size_t hash_addr(uintptr_t a)
{
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static mp_pcinfo **pc_slot(mp_syms *s, uintptr_t addr)
{
    size_t j = hash_addr(addr) & (s->pcs_cap - 1);
    while (s->pcs[j] && s->pcs[j]->addr != addr)
        j = (j + 1) & (s->pcs_cap - 1);
    return &s->pcs[j];
}

static bool grow_pcs(mp_syms *s)
{
    size_t nc = s->pcs_cap ? s->pcs_cap * 2 : 1024;
    mp_pcinfo **old = s->pcs;
    size_t oc = s->pcs_cap;
    s->pcs = calloc(nc, sizeof *s->pcs);
    if (s->pcs == NULL) {
        s->pcs = old;
        return false;
    }
    s->pcs_cap = nc;
    for (size_t i = 0; i < oc; i++)
        if (old[i])
            *pc_slot(s, old[i]->addr) = old[i];
    free(old);
    return true;
}

/* ---- functions: ELF symbols ---- */

/* The file an object's symbols are read from. */
static const char *sym_file(const mp_obj *o) { return o->sym_path != NULL ? o->sym_path : o->path; }

static struct mp_obj_syms *obj_syms(mp_obj *o)
{
    if (o->syms == NULL)
        o->syms = calloc(1, sizeof *o->syms);
    return o->syms;
}

/* Objects that are not ELF files (Mach-O), and addresses outside every
 * mapping where the platform has no loader enumeration: the name the
 * platform layer verified to be the containing function's, else none. */
static const char *native_name(mp_syms *s, uintptr_t addr)
{
    return intern(s, mp_plat_function_name(addr));
}

/* Where separate debug files live: $MIMPROF_DEBUG_ROOT, else
 * /usr/lib/debug. Offline only: a profiler never asks a debuginfod server.
 * Copied from the initial environment when the library is loaded, before
 * the program's main: not through getenv() on the reporter thread, which
 * in bash is bash's own getenv racing bash's main thread, and not kept as
 * a pointer into an environment the program may rewrite or free. */
static char g_debug_root[1024] = "/usr/lib/debug"; /* longer roots are ignored */

__attribute__((constructor)) static void debug_root_init(void)
{
    static const char key[] = "MIMPROF_DEBUG_ROOT=";
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, key, sizeof key - 1) != 0)
            continue;
        const char *v = *e + sizeof key - 1;
        if (v[0] == '/' && strlen(v) < sizeof g_debug_root)
            memcpy(g_debug_root, v, strlen(v) + 1);
        return;
    }
}

static const char *debug_root(void) { return g_debug_root; }

/* The object's function symbols: its own .symtab, else the .symtab of the
 * separate debug file its build-id names (ROOT/.build-id/xx/yyyy.debug,
 * which distributions ship apart: Debian's -dbg and -dbgsym packages; only
 * there are a stripped library's local functions, e.g. libc's
 * __libc_start_call_main), else its .dynsym. The debug file must carry the
 * same build-id. */
static void read_symtab(const mp_obj *o, mp_elf_symtab *out)
{
    mp_elf_status st = mp_elf_read_symbols_file(sym_file(o), o->build_id, out);
    if (st == MP_ELF_OK && out->source == MP_ELF_SYMS_SYMTAB)
        return;
    if (strlen(o->build_id) < 4)
        return;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", debug_root(), o->build_id,
                     o->build_id + 2);
    if (n <= 0 || (size_t)n >= sizeof path)
        return;
    mp_elf_symtab dbg;
    if (mp_elf_read_symbols_file(path, o->build_id, &dbg) == MP_ELF_OK &&
        dbg.source == MP_ELF_SYMS_SYMTAB && dbg.count != 0) {
        mp_elf_symtab_free(out);
        *out = dbg;
        return;
    }
    mp_elf_symtab_free(&dbg);
}

static const char *elf_name(mp_syms *s, mp_obj *o, uintptr_t addr)
{
    struct mp_obj_syms *os = obj_syms(o);
    if (os == NULL || !o->has_file)
        return NULL;
    if (!os->symtab_tried) {
        os->symtab_tried = true;
        read_symtab(o, &os->symtab);
        s->symtab_bytes += mp_elf_symtab_bytes(&os->symtab);
    }
    const mp_elf_sym *sym = mp_elf_symtab_lookup(&os->symtab, (uint64_t)(addr - o->base));
    return sym ? intern(s, os->symtab.names + sym->name) : NULL;
}

/* ---- lines: DWARF ---- */

#define MAX_INLINE 32

#if MP_HAVE_LIBDW
/* Separate debug info, offline only: /usr/lib/debug/.build-id and the
 * .gnu_debuglink places. (dwfl_standard_find_debuginfo may query a
 * debuginfod server over the network; a profiler must not.) */
static int try_open(const char *path, char **name)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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
        snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", debug_root(), hex, hex + 2);
        int fd = try_open(path, debuginfo_file_name);
        if (fd >= 0)
            return fd;
    }
    if (debuglink_file != NULL && file_name != NULL && strchr(debuglink_file, '/') == NULL) {
        const char *slash = strrchr(file_name, '/');
        int dirlen = slash ? (int)(slash - file_name) : 0;
        /* DIR/LINK, DIR/.debug/LINK, ROOT/DIR/LINK */
        const char *pre[3] = {"", "", debug_root()}, *mid[3] = {"/", "/.debug/", "/"};
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

static Dwfl_Module *obj_module(mp_syms *s, mp_obj *o)
{
    struct mp_obj_syms *os = obj_syms(o);
    if (os == NULL || !o->has_file)
        return NULL;
    if (!os->dwfl_tried) {
        os->dwfl_tried = true;
        os->dwfl = dwfl_begin(&dwfl_cbs);
        if (os->dwfl == NULL)
            return NULL;
        s->dwfl_count++;
        dwfl_report_begin(os->dwfl);
        os->mod = dwfl_report_elf(os->dwfl, o->path, sym_file(o), -1, o->base, true);
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
    return intern(s, buf);
}

/* Names frame `f` after function DIE `d` of a unit (`cxx`: a C++ one).
 * `elf_sym`: for the physical frame, the ELF symbol containing the
 * address, which is that function's linkage name when the compiler wrote
 * none in DWARF (GCC omits it for lambdas' operator() and for functions
 * in anonymous namespaces); NULL for inlined frames. */
static void name_die(mp_syms *s, mp_frame *f, Dwarf_Die *d, bool cxx, const char *elf_sym)
{
    const char *sys = intern(s, die_linkage_name(d));
    if (sys == NULL && cxx && mp_demangle_looks_mangled(elf_sym))
        sys = elf_sym;
    if (sys != NULL) {
        set_name(s, f, sys);
        return;
    }
    const char *name = die_name(d);
    f->func = intern(s, name);
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
        return intern(s, file);
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
            return intern(s, file);
        segs[nseg++] = o;
        int w = snprintf(out + o, sizeof out - o, "%s%s", (o > 0 || absolute) ? "/" : "", seg);
        if (w < 0 || (size_t)w >= sizeof out - o)
            return intern(s, file);
        o += (size_t)w;
    }
    if (o == 0)
        snprintf(out, sizeof out, "%s", absolute ? "/" : ".");
    return intern(s, out);
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

/* Frames of `addr` from DWARF, innermost first; -1 when the address has
 * no DWARF unit. */
static int dwarf_frames(mp_syms *s, mp_obj *o, uintptr_t addr, mp_frame *fr, uint8_t *flags)
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
    /* The innermost function scope at addr; then its containing scopes in
     * the concrete tree (an inlined instance sits inside its caller). */
    Dwarf_Die *scopes = NULL, *chain = NULL;
    int n = dwarf_getscopes(cu, addr - bias, &scopes);
    int inner = -1;
    for (int i = 0; i < n && inner < 0; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
            inner = i;
    }
    int nchain = inner >= 0 ? dwarf_getscopes_die(&scopes[inner], &chain) : 0;
    bool cxx = cu_is_cxx(cu);
    int k = 0;
    for (int i = 0; i < nchain && k < MAX_INLINE; i++) {
        int tag = dwarf_tag(&chain[i]);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        name_die(s, &fr[k], &chain[i], cxx, tag == DW_TAG_subprogram ? elf_name(s, o, addr) : NULL);
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
        if (have_files && dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &a), &v) == 0 &&
            v < nfiles)
            file = dwarf_filesrc(files, v, NULL, NULL);
        if (dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_line, &a), &v) == 0 && v < INT32_MAX)
            line = (int)v;
    }
    free(scopes);
    free(chain);
    if (nchain > 0)
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
        set_name(s, &fr[k - 1], elf_name(s, o, addr));
    return k;
}
#endif

const mp_pcinfo *mp_syms_resolve(mp_syms *s, mp_obj *o, uintptr_t addr, mp_prof_symbolize mode,
                                 bool local)
{
    if ((s->npcs + 1) * 2 > s->pcs_cap && !grow_pcs(s))
        return NULL;
    mp_pcinfo **slot = pc_slot(s, addr);
    if (*slot != NULL && (*slot)->mode == (uint8_t)mode)
        return *slot;

    mp_frame fr[MAX_INLINE];
    int k = 0;
    uint8_t flags = 0;
    if (mode != MP_PROF_SYMBOLIZE_NONE && local && (o == NULL || o->native_names)) {
        set_name(s, &fr[0], native_name(s, addr));
        fr[0].file = NULL;
        fr[0].line = 0;
        k = fr[0].func != NULL;
    } else if (o != NULL && mode != MP_PROF_SYMBOLIZE_NONE) {
#if MP_HAVE_LIBDW
        if (mode == MP_PROF_SYMBOLIZE_LINES)
            k = dwarf_frames(s, o, addr, fr, &flags);
#endif
        if (k <= 0) {
            const char *name = elf_name(s, o, addr);
            k = 0;
            if (name != NULL) {
                set_name(s, &fr[0], name);
                fr[0].file = NULL;
                fr[0].line = 0;
                k = 1;
            }
        }
    }
    mp_pcinfo *pi = *slot;
    if (pi == NULL) {
        pi = arena_alloc(&s->mem, sizeof *pi);
        if (pi == NULL)
            return NULL;
        s->npcs++;
    }
    pi->addr = addr;
    pi->mode = (uint8_t)mode;
    pi->flags = flags;
    pi->nframes = (uint16_t)k;
    pi->frames = NULL;
    if (k > 0) {
        pi->frames = arena_alloc(&s->mem, (size_t)k * sizeof *pi->frames);
        if (pi->frames == NULL) {
            pi->nframes = 0;
            pi->mode = 0xff; /* resolved again next time */
            *slot = pi;
            return NULL;
        }
        memcpy(pi->frames, fr, (size_t)k * sizeof *fr);
    }
    *slot = pi;
    return pi;
}
