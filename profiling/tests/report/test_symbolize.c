/* SPDX-License-Identifier: MIT */
/* Mappings (vs /proc/self/maps, readelf -n) and symbolization of known
 * sites of this -O2 -g test program, of libc and of a dlopen'd library. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>

#include "report_builder.h"
#include "report_internal.h"
#include "report_pcs.h"
#include "sites.h"
#include "util.h"

typedef struct maps_line {
    uintptr_t start, end;
    uint64_t off;
    char perms[8];
    char path[PATH_MAX];
} maps_line;

static size_t read_proc_maps(maps_line *out, size_t cap)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[PATH_MAX + 256];
    size_t n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        maps_line *m = &out[n];
        unsigned long s, e;
        unsigned long long off;
        int pos = 0;
        m->path[0] = '\0';
        if (sscanf(line, "%lx-%lx %7s %llx %*s %*s%n", &s, &e, m->perms, &off, &pos) < 4)
            continue;
        m->start = s;
        m->end = e;
        m->off = off;
        char *p = line + pos;
        while (*p == ' ')
            p++;
        p[strcspn(p, "\n")] = '\0';
        snprintf(m->path, sizeof m->path, "%s", p);
        n++;
    }
    fclose(f);
    return n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

Test(report_maps, match_proc_self_maps)
{
    report_site_alpha();
    uintptr_t pc = sites_pc;
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, &pc, 1, MP_PROF_SYMBOLIZE_NONE);
    static maps_line ml[4096];
    size_t n = read_proc_maps(ml, 4096);
    cr_assert_gt(n, 0);
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k] = '\0';
    cr_assert_str_eq(ut_str(p, p->mapping[0]->filename), exe, "mapping[0] is the main binary");
    size_t file_exec = 0;
    for (size_t i = 0; i < n; i++)
        if (strchr(ml[i].perms, 'x') && ml[i].path[0] == '/')
            file_exec++;
    size_t matched_files = 0;
    for (size_t i = 0; i < p->n_mapping; i++) {
        const Perftools__Profiles__Mapping *m = p->mapping[i];
        cr_assert_eq(m->id, i + 1);
        const maps_line *hit = NULL;
        for (size_t j = 0; j < n && !hit; j++)
            if (ml[j].start == m->memory_start)
                hit = &ml[j];
        cr_assert_not_null(hit, "mapping %s at %#lx is in /proc/self/maps", ut_str(p, m->filename),
                           (unsigned long)m->memory_start);
        cr_assert_eq(hit->off, m->file_offset);
        cr_assert_not_null(strchr(hit->perms, 'x'));
        /* The segment may be split in /proc/self/maps (a part mprotect()ed
         * by its owner): contiguous lines of the same file whose offsets
         * follow the addresses cover it exactly. */
        uintptr_t at = hit->end;
        for (const maps_line *nx = hit + 1; at < m->memory_limit && nx < ml + n; nx++) {
            cr_assert_eq(nx->start, at, "%s: a gap in the segment", hit->path);
            cr_assert_str_eq(nx->path, hit->path);
            cr_assert_eq(nx->off - m->file_offset, nx->start - m->memory_start,
                         "file_offset arithmetic holds across the segment");
            at = nx->end;
        }
        cr_assert_eq(at, m->memory_limit, "%s: maps end %#lx, mapping limit %#lx", hit->path,
                     (unsigned long)at, (unsigned long)m->memory_limit);
        if (hit->path[0] == '/') {
            cr_assert_str_eq(hit->path, ut_str(p, m->filename));
            matched_files++;
        }
    }
    /* Every executable file mapping of the process is inside a mapping. */
    for (size_t j = 0; j < n; j++) {
        if (!strchr(ml[j].perms, 'x') || ml[j].path[0] != '/')
            continue;
        bool inside = false;
        for (size_t i = 0; i < p->n_mapping && !inside; i++)
            inside = ml[j].start >= p->mapping[i]->memory_start &&
                     ml[j].end <= p->mapping[i]->memory_limit;
        cr_assert(inside, "%s %#lx is covered", ml[j].path, (unsigned long)ml[j].start);
    }
    cr_assert_leq(matched_files, file_exec);
    cr_assert_gt(matched_files, 2);

    /* file_offset arithmetic: the bytes at the file offset computed from
     * the mapping are the bytes of the code in memory. */
    const Perftools__Profiles__Location *l = p->location[0];
    const Perftools__Profiles__Mapping *m = ut_map(p, l->mapping_id);
    cr_assert_not_null(m);
    cr_assert(l->address >= m->memory_start && l->address < m->memory_limit);
    cr_assert_eq(m->id, 1, "the sites are in the main binary");
    uint64_t foff = l->address - m->memory_start + m->file_offset;
    FILE *f = fopen(ut_str(p, m->filename), "rb");
    cr_assert_not_null(f);
    unsigned char disk[16];
    cr_assert_eq(fseek(f, (long)foff - 8, SEEK_SET), 0);
    cr_assert_eq(fread(disk, 1, 16, f), 16);
    fclose(f);
    cr_assert_arr_eq(disk, (const void *)(uintptr_t)(l->address - 8), 16);
    ut_free(p);
    mp_report_cache_free(c);
}

static void readelf_build_id(const char *path, char *out, size_t cap)
{
    int st;
    char *o = ut_run(
        &st, "'%s' -n '%s' 2>/dev/null | sed -n 's/.*Build ID: *\\([0-9a-f]*\\).*/\\1/p' | head -1",
        READELF, path);
    cr_assert_not_null(o);
    o[strcspn(o, "\n")] = '\0';
    snprintf(out, cap, "%s", o);
    free(o);
}

Test(report_maps, build_ids_equal_readelf)
{
    mp_report_cache *c = mp_report_cache_new();
    report_site_alpha();
    uintptr_t pc = sites_pc;
    ut_prof *p = report_pcs(c, &pc, 1, MP_PROF_SYMBOLIZE_NONE);
    size_t checked = 0;
    for (size_t i = 0; i < p->n_mapping; i++) {
        const char *file = ut_str(p, p->mapping[i]->filename);
        if (file[0] != '/')
            continue;
        char want[256];
        readelf_build_id(file, want, sizeof want);
        cr_assert_str_eq(ut_str(p, p->mapping[i]->build_id), want, "build-id of %s", file);
        if (want[0])
            checked++;
    }
    cr_assert_geq(checked, 2, "the test binary and libc have build-ids");
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_maps, refreshed_only_when_objects_change)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_maps *m = mp_report_cache_maps(c);
    cr_assert(mp_report_cache_refresh(c));
    uint64_t r = m->refreshes;
    cr_assert_eq(r, 1);
    cr_assert(mp_report_cache_refresh(c));
    cr_assert(mp_report_cache_refresh(c));
    cr_assert_eq(m->refreshes, r, "no change, no rebuild");
    void *h = dlopen(DLSITE_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    cr_assert(mp_report_cache_refresh(c));
    cr_assert_eq(m->refreshes, r + 1);
    dlclose(h);
    mp_report_cache_free(c);
}

Test(report_symbols, functions_mode_names)
{
    uintptr_t pcs[3];
    sites_three_pcs(pcs);
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, 3, MP_PROF_SYMBOLIZE_FUNCTIONS);
    cr_assert_str_eq(ut_line_fn(p, loc_for(p, pcs[0]), 0), "report_site_alpha");
    /* The ELF symbol of inlined code is the outer function. */
    cr_assert_str_eq(ut_line_fn(p, loc_for(p, pcs[1]), 0), "report_outer_gamma");
    cr_assert_str_eq(ut_line_fn(p, loc_for(p, pcs[2]), 0), "mp_prof_sample_hook");
    cr_assert_str_empty(ut_line_file(p, loc_for(p, pcs[0]), 0));
    const Perftools__Profiles__Mapping *m = p->mapping[0];
    cr_assert(m->has_functions);
    cr_assert_not(m->has_filenames);
    cr_assert_not(m->has_line_numbers);
    cr_assert_not(m->has_inline_frames);
    mp_prof_symbol_quality q;
    cr_assert_eq(mp_report_cache_last_quality(c), MP_PROF_QUALITY_FUNCTIONS);
    ut_free(p);
    /* none: addresses only. */
    p = report_pcs(c, pcs, 3, MP_PROF_SYMBOLIZE_NONE);
    cr_assert_eq(p->n_function, 0);
    cr_assert_not(p->mapping[0]->has_functions);
    cr_assert_eq(mp_report_cache_last_quality(c), MP_PROF_QUALITY_ADDRESSES_ONLY);
    (void)q;
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_symbols, lines_mode_file_line_and_inlined)
{
#if !MP_HAVE_LIBDW
    cr_skip_test("built without libdw");
#endif
    uintptr_t pcs[2];
    report_site_alpha();
    pcs[0] = sites_pc;
    int alpha_line = sites_line;
    report_outer_gamma();
    pcs[1] = sites_pc;
    int beta_line = sites_line, call_line = sites_call_line;
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, 2, MP_PROF_SYMBOLIZE_LINES);
    const Perftools__Profiles__Location *a = loc_for(p, pcs[0]);
    cr_assert_eq(a->n_line, 1);
    cr_assert_str_eq(ut_line_fn(p, a, 0), "report_site_alpha");
    cr_assert(ends_with(ut_line_file(p, a, 0), "/sites.c"), "%s", ut_line_file(p, a, 0));
    cr_assert_eq(a->line[0]->line, alpha_line);
    const Perftools__Profiles__Location *g = loc_for(p, pcs[1]);
    cr_assert_eq(g->n_line, 2, "inlined frame + its caller");
    cr_assert_str_eq(ut_line_fn(p, g, 0), "report_inlined_beta");
    cr_assert_eq(g->line[0]->line, beta_line);
    cr_assert_str_eq(ut_line_fn(p, g, 1), "report_outer_gamma");
    cr_assert_eq(g->line[1]->line, call_line);
    cr_assert(ends_with(ut_line_file(p, g, 1), "/sites.c"));
    const Perftools__Profiles__Mapping *m = p->mapping[0];
    cr_assert(m->has_functions);
    cr_assert(m->has_filenames);
    cr_assert(m->has_line_numbers);
    cr_assert(m->has_inline_frames);
    cr_assert_eq(mp_report_cache_last_quality(c), MP_PROF_QUALITY_FULL);
    /* Cached across reports: the same answer again, no growth. */
    size_t bytes = mp_report_cache_symbol_bytes(c);
    cr_assert_gt(bytes, 0);
    ut_free(p);
    p = report_pcs(c, pcs, 2, MP_PROF_SYMBOLIZE_LINES);
    cr_assert_eq(mp_report_cache_symbol_bytes(c), bytes);
    cr_assert_eq(loc_for(p, pcs[1])->n_line, 2);
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_symbols, flags_only_when_true_for_every_location)
{
#if !MP_HAVE_LIBDW
    cr_skip_test("built without libdw");
#endif
    uintptr_t pcs[2];
    report_site_alpha();
    pcs[0] = sites_pc;
    report_site_libc();
    pcs[1] = sites_pc;
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, 2, MP_PROF_SYMBOLIZE_LINES);
    const Perftools__Profiles__Location *l = loc_for(p, pcs[1]);
    const Perftools__Profiles__Mapping *m = ut_map(p, l->mapping_id);
    cr_assert_not_null(m);
    cr_assert_not_null(strstr(ut_str(p, m->filename), "libc.so"), "%s", ut_str(p, m->filename));
    cr_assert(m->has_functions, "libc has .dynsym names");
    cr_assert_gt(strlen(ut_line_fn(p, l, 0)), 0);
    if (strlen(ut_line_file(p, l, 0)) == 0) { /* no libc debug info installed */
        cr_assert_not(m->has_filenames);
        cr_assert_not(m->has_line_numbers);
    }
    /* Mappings without locations claim nothing. */
    for (size_t i = 0; i < p->n_mapping; i++) {
        bool used = false;
        for (size_t j = 0; j < p->n_location; j++)
            used = used || p->location[j]->mapping_id == p->mapping[i]->id;
        if (!used)
            cr_assert_not(p->mapping[i]->has_functions);
    }
    ut_free(p);
    mp_report_cache_free(c);
}

static volatile uintptr_t dl_pc;
static volatile int dl_line;
static void dl_capture(int line)
{
    dl_pc = (uintptr_t)__builtin_return_address(0);
    dl_line = line;
}

Test(report_symbols, dlopened_library_and_dlclose)
{
    mp_report_cache *c = mp_report_cache_new();
    void *h = dlopen(DLSITE_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    void (*site)(void (*)(int)) = (void (*)(void (*)(int)))(uintptr_t)dlsym(h, "report_dl_site");
    cr_assert_not_null((void *)(uintptr_t)site);
    site(dl_capture);
    uintptr_t pc = dl_pc;
    mp_prof_symbolize mode = MP_PROF_SYMBOLIZE_LINES;
    ut_prof *p = report_pcs(c, &pc, 1, mode);
    const Perftools__Profiles__Location *l = loc_for(p, pc);
    const Perftools__Profiles__Mapping *m = ut_map(p, l->mapping_id);
    cr_assert_not_null(m);
    char real[PATH_MAX];
    cr_assert_not_null(realpath(DLSITE_PATH, real));
    cr_assert_str_eq(ut_str(p, m->filename), real);
    cr_assert_gt(strlen(ut_str(p, m->build_id)), 0);
    cr_assert_str_eq(ut_line_fn(p, l, 0), "report_dl_site");
#if MP_HAVE_LIBDW
    cr_assert(ends_with(ut_line_file(p, l, 0), "/dlsite.c"));
    cr_assert_eq(l->line[0]->line, dl_line);
#endif
    uint64_t start = m->memory_start;
    ut_free(p);

    /* The library goes away; its earlier sample keeps its mapping and
     * its names (read from the file again), and nothing crashes. */
    cr_assert_eq(dlclose(h), 0);
    p = report_pcs(c, &pc, 1, mode);
    l = loc_for(p, pc);
    m = ut_map(p, l->mapping_id);
    cr_assert_not_null(m, "mapping retained after dlclose");
    cr_assert_eq(m->memory_start, start);
    cr_assert_str_eq(ut_str(p, m->filename), real);
    cr_assert_str_eq(ut_line_fn(p, l, 0), "report_dl_site");
    ut_free(p);

    /* A cache that never saw the library: an address without a mapping. */
    mp_report_cache *c2 = mp_report_cache_new();
    p = report_pcs(c2, &pc, 1, mode);
    l = loc_for(p, pc);
    cr_assert_eq(l->mapping_id, 0);
    cr_assert_eq(l->n_line, 0);
    ut_free(p);
    mp_report_cache_free(c2);
    mp_report_cache_free(c);
}

Test(report_symbols, budget_bounds_symbol_memory)
{
    uintptr_t pcs[2];
    report_site_alpha();
    pcs[0] = sites_pc;
    report_site_libc();
    pcs[1] = sites_pc;
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, 2, MP_PROF_SYMBOLIZE_FUNCTIONS);
    ut_free(p);
    size_t full = mp_report_cache_symbol_bytes(c);
    cr_assert_gt(full, 0);
    mp_report_cache_set_budget(c, 1);
    /* The next report starts by trimming; it still names everything. */
    p = report_pcs(c, pcs, 2, MP_PROF_SYMBOLIZE_FUNCTIONS);
    cr_assert_str_eq(ut_line_fn(p, loc_for(p, pcs[0]), 0), "report_site_alpha");
    ut_free(p);
    mp_report_builder *b =
        mp_report_begin(c, &(mp_report_options){.symbolize = MP_PROF_SYMBOLIZE_NONE});
    cr_assert_lt(mp_report_cache_symbol_bytes(c), full / 4 + 1024, "trimmed: %zu of %zu",
                 mp_report_cache_symbol_bytes(c), full);
    mp_report_abort(b);
    mp_report_cache_free(c);
}
