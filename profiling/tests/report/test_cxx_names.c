/* SPDX-License-Identifier: MIT */
/* Demangled, qualified names of C++ frames (cxx_sites.cpp, -O2 -g) in
 * both symbolize modes: Function.name is the human name, system_name the
 * linkage name; a C function's two names are equal; inlined frames of C++
 * are qualified like physical ones; libstdc++'s operator new (.dynsym
 * only) is demangled too. */
#include <criterion/criterion.h>

#include "cxx_sites.h"
#include "demangle.h"
#include "report_builder.h"
#include "report_internal.h"
#include "report_pcs.h"
#include "sites.h"
#include "util.h"

#define PUT    "shop::Cache<shop::Item>::put"
#define LAMBDA "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()"

typedef void (*site_fn)(void);

static const struct {
    site_fn run;
    const char *name;       /* the physical (outermost) frame's human name */
    const char *sys_prefix; /* its linkage name starts so */
} cases[] = {
    {cxx_site_member_template, PUT, "_ZN4shop5CacheINS_4ItemEE3putERKNSt7__cxx1112basic_string"},
    {cxx_site_overload, PUT, "_ZN4shop5CacheINS_4ItemEE3putEi"},
    {cxx_site_function_template, "shop::make<shop::Item>", "_ZN4shop4makeINS_4ItemEEET_v"},
    {cxx_site_lambda, LAMBDA, "_ZZN4shop4fillEmENKUlmE_clEm"},
    {cxx_site_anonymous, "(anonymous namespace)::work", "_ZN12_GLOBAL__N_14workEv"},
    {cxx_site_virtual, "shop::Derived::size", "_ZNK4shop7Derived4sizeEv"},
};
#define NCASES (sizeof cases / sizeof cases[0])

static const Perftools__Profiles__Function *
frame_fn(const ut_prof *p, const Perftools__Profiles__Location *l, size_t k)
{
    cr_assert(l != NULL && k < l->n_line);
    const Perftools__Profiles__Function *f = ut_fn(p, l->line[k]->function_id);
    cr_assert_not_null(f);
    return f;
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Return addresses inside each case's function, then report_site_alpha
 * (C), operator new and operator new[]. */
static size_t collect(uintptr_t *pcs)
{
    size_t n = 0;
    for (size_t i = 0; i < NCASES; i++) {
        cases[i].run();
        pcs[n++] = sites_pc;
    }
    report_site_alpha();
    pcs[n++] = sites_pc;
    pcs[n++] = cxx_operator_new_address() + 2; /* a return address is past the call: inside */
    pcs[n++] = cxx_operator_new_array_address() + 2;
    return n;
}

/* Why the test cannot run in this build (`lines`: it needs libdw), or NULL. */
static const char *cannot_run(bool lines)
{
    if (lines && !MP_HAVE_LIBDW)
        return "built without libdw";
    return mp_demangle_available() ? NULL : "built without the demangle feature";
}

static void check_outer_names(const ut_prof *p, const uintptr_t *pcs)
{
    for (size_t i = 0; i < NCASES; i++) {
        const Perftools__Profiles__Location *l = loc_for(p, pcs[i]);
        const Perftools__Profiles__Function *f = frame_fn(p, l, l->n_line - 1);
        cr_expect_str_eq(ut_str(p, f->name), cases[i].name, "case %zu", i);
        cr_expect(starts_with(ut_str(p, f->system_name), cases[i].sys_prefix), "case %zu: %s", i,
                  ut_str(p, f->system_name));
    }
    const Perftools__Profiles__Function *c = frame_fn(p, loc_for(p, pcs[NCASES]), 0);
    cr_expect_str_eq(ut_str(p, c->name), "report_site_alpha");
    cr_expect_eq(c->system_name, c->name, "a C name is its own system name");
    const Perftools__Profiles__Function *nw = frame_fn(p, loc_for(p, pcs[NCASES + 1]), 0);
    cr_expect_str_eq(ut_str(p, nw->name), "operator new");
    cr_expect_str_eq(ut_str(p, nw->system_name), "_Znwm");
    const Perftools__Profiles__Function *na = frame_fn(p, loc_for(p, pcs[NCASES + 2]), 0);
    cr_expect_str_eq(ut_str(p, na->name), "operator new[]");
    cr_expect_str_eq(ut_str(p, na->system_name), "_Znam");
}

Test(cxx_names, functions_mode)
{
    if (cannot_run(false))
        cr_skip_test("%s", cannot_run(false));
    uintptr_t pcs[NCASES + 3];
    size_t n = collect(pcs);
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, n, MP_PROF_SYMBOLIZE_FUNCTIONS);
    check_outer_names(p, pcs);
    /* The two overloads share the human name and are two functions. */
    const Perftools__Profiles__Function *a = frame_fn(p, loc_for(p, pcs[0]), 0);
    const Perftools__Profiles__Function *b = frame_fn(p, loc_for(p, pcs[1]), 0);
    cr_expect_eq(a->name, b->name);
    cr_expect_neq(a->id, b->id);
    ut_free(p);
    /* Cached: a second report demangles nothing new and holds no more. */
    size_t bytes = mp_report_cache_symbol_bytes(c);
    p = report_pcs(c, pcs, n, MP_PROF_SYMBOLIZE_FUNCTIONS);
    cr_expect_eq(mp_report_cache_symbol_bytes(c), bytes);
    check_outer_names(p, pcs);
    ut_free(p);
    mp_report_cache_free(c);
}

Test(cxx_names, lines_mode_physical_and_inlined)
{
    if (cannot_run(true))
        cr_skip_test("%s", cannot_run(true));
    uintptr_t pcs[NCASES + 3];
    size_t n = collect(pcs);
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *p = report_pcs(c, pcs, n, MP_PROF_SYMBOLIZE_LINES);
    check_outer_names(p, pcs);
    /* put(std::string const&) inlined touch(): its frame is qualified. */
    const Perftools__Profiles__Location *l = loc_for(p, pcs[0]);
    cr_assert_eq(l->n_line, 2, "the inlined frame and put");
    const Perftools__Profiles__Function *in = frame_fn(p, l, 0);
    cr_expect_str_eq(ut_str(p, in->name), "shop::Cache<shop::Item>::touch");
    cr_expect_str_eq(ut_str(p, in->system_name), "_ZN4shop5CacheINS_4ItemEE5touchEv");
    cr_expect_gt(l->line[0]->line, 0);
    cr_expect(strstr(ut_str(p, in->filename), "cxx_sites.cpp") != NULL);
    ut_free(p);
    mp_report_cache_free(c);
}

/* functions (ELF symbols) and lines (DWARF) name physical frames alike. */
Test(cxx_names, modes_agree_on_physical_frames)
{
    if (cannot_run(true))
        cr_skip_test("%s", cannot_run(true));
    uintptr_t pcs[NCASES + 3];
    size_t n = collect(pcs);
    mp_report_cache *c = mp_report_cache_new();
    ut_prof *f = report_pcs(c, pcs, n, MP_PROF_SYMBOLIZE_FUNCTIONS);
    ut_prof *l = report_pcs(c, pcs, n, MP_PROF_SYMBOLIZE_LINES);
    for (size_t i = 0; i < n; i++) {
        const Perftools__Profiles__Location *a = loc_for(f, pcs[i]), *b = loc_for(l, pcs[i]);
        cr_expect_str_eq(ut_str(f, frame_fn(f, a, a->n_line - 1)->name),
                         ut_str(l, frame_fn(l, b, b->n_line - 1)->name), "pc %zu", i);
    }
    ut_free(f);
    ut_free(l);
    mp_report_cache_free(c);
}
