/* SPDX-License-Identifier: MIT */
/* Allocator frames dropped from the leaf end (drop.c, prune.c,
 * prune_pprof.c): libstdc++'s operator new under a C++ site (cxx_sites.cpp)
 * is not the leaf in either mode and the profile names its drop_frames;
 * MP_PROF_DROP_NOTHING keeps it; a caller's pattern is matched as pprof
 * matches (whole name, parameter list left out); a stack of allocator
 * frames stays whole; mp_prof_set_drop_frames refuses what is not a
 * regular expression; an encoded profile is pruned at its own
 * drop_frames with pprof's rule (inner inlined frames, root-first cut). */
#include <criterion/criterion.h>

#include "cxx_sites.h"
#include "demangle.h"
#include "drop.h"
#include "report_builder.h"
#include "report_internal.h"
#include "report_pcs.h"
#include "sites.h"
#include "util.h"

#define LAMBDA "shop::fill(unsigned long)::{lambda(unsigned long)#1}::operator()"

/* One report of the given stacks (leaf first, `ns` of them, each `depth`
 * return addresses), decoded. */
static ut_prof *report_stacks(const uintptr_t *stacks, size_t ns, size_t depth,
                              mp_prof_symbolize mode)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = {.period = 4096, .symbolize = mode};
    mp_report_builder *b = mp_report_begin(c, &o);
    cr_assert_not_null(b);
    double v[4] = {1, 100, 1, 100};
    for (size_t i = 0; i < ns; i++)
        cr_assert_eq(mp_report_add(b, stacks + i * depth, depth, false, v, false), MP_PROF_OK);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(mp_report_finish(b, &buf, &len), MP_PROF_OK);
    ut_prof *p = ut_decode(buf, len);
    cr_assert_not_null(p);
    free(buf);
    mp_report_cache_free(c);
    return p;
}

/* The names of sample i's frames, leaf first, joined by " < ". */
static char *frames_of(const ut_prof *p, size_t i)
{
    static char out[4096];
    out[0] = '\0';
    const Perftools__Profiles__Sample *s = p->sample[i];
    for (size_t k = 0; k < s->n_location_id; k++) {
        const Perftools__Profiles__Location *l = ut_loc(p, s->location_id[k]);
        cr_assert_not_null(l);
        for (size_t j = 0; j < l->n_line; j++) {
            if (out[0] != '\0')
                strncat(out, " < ", sizeof out - strlen(out) - 1);
            strncat(out, ut_str(p, ut_fn(p, l->line[j]->function_id)->name),
                    sizeof out - strlen(out) - 1);
        }
    }
    return out;
}

/* [operator new, the lambda, report_site_alpha] and [operator new]. */
static void stacks(uintptr_t s[6])
{
    cxx_site_lambda();
    uintptr_t lambda = sites_pc;
    report_site_alpha();
    uintptr_t alpha = sites_pc;
    uintptr_t nw = cxx_operator_new_address() + 2;
    uintptr_t two[6] = {nw, lambda, alpha, nw, nw, nw};
    memcpy(s, two, sizeof two);
}

static void check_mode(mp_prof_symbolize mode)
{
    uintptr_t s[6];
    stacks(s);
    ut_prof *p = report_stacks(s, 2, 3, mode);
    cr_assert_eq(p->n_sample, 2);
    cr_expect_str_eq(frames_of(p, 0), LAMBDA " < report_site_alpha");
    cr_expect_str_eq(frames_of(p, 1), "operator new < operator new < operator new",
                     "a stack of allocator frames stays whole");
    cr_expect_str_eq(ut_str(p, p->drop_frames), mp_prof_drop_frames_default());
    ut_free(p);

    cr_assert_eq(mp_prof_set_drop_frames(NULL, MP_PROF_DROP_NOTHING), MP_PROF_OK);
    p = report_stacks(s, 2, 3, mode);
    cr_expect_str_eq(frames_of(p, 0), "operator new < " LAMBDA " < report_site_alpha");
    cr_expect_eq(p->drop_frames, 0, "no drop_frames when nothing is dropped");
    ut_free(p);

    /* pprof matches the name without its parameters: shop::fill */
    cr_assert_eq(mp_prof_set_drop_frames("shop::fill", MP_PROF_DROP_ALLOCATOR), MP_PROF_OK);
    p = report_stacks(s, 2, 3, mode);
    cr_expect_str_eq(frames_of(p, 0), "report_site_alpha");
    char want[8192];
    snprintf(want, sizeof want, "%s|shop::fill", mp_prof_drop_frames_default());
    cr_expect_str_eq(ut_str(p, p->drop_frames), want);
    ut_free(p);
    cr_assert_eq(mp_prof_set_drop_frames(NULL, MP_PROF_DROP_ALLOCATOR), MP_PROF_OK);
}

Test(drop, operator_new_leaves_the_leaf_functions)
{
    if (!mp_demangle_available())
        cr_skip_test("built without the demangle feature");
    check_mode(MP_PROF_SYMBOLIZE_FUNCTIONS);
}

Test(drop, operator_new_leaves_the_leaf_lines)
{
    if (!MP_HAVE_LIBDW || !mp_demangle_available())
        cr_skip_test("built without libdw or demangling");
    check_mode(MP_PROF_SYMBOLIZE_LINES);
}

Test(drop, without_names_only_drop_frames)
{
    uintptr_t s[6];
    stacks(s);
    ut_prof *p = report_stacks(s, 2, 3, MP_PROF_SYMBOLIZE_NONE);
    cr_expect_eq(p->sample[0]->n_location_id, 3, "nothing dropped: the server's symbolizer will");
    cr_expect_str_eq(ut_str(p, p->drop_frames), mp_prof_drop_frames_default());
    ut_free(p);
}

Test(drop, refuses_what_is_not_a_pattern)
{
    cr_expect_eq(mp_prof_set_drop_frames("site_(new", MP_PROF_DROP_ALLOCATOR),
                 MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_set_drop_frames("a)|(b", MP_PROF_DROP_ALLOCATOR), MP_PROF_E_INVALID_CONFIG,
                 "cannot pair with the default's parentheses");
    cr_expect_eq(mp_prof_set_drop_frames("x", (mp_prof_drop_mode)7), MP_PROF_E_INVALID_CONFIG);
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_expect_eq(mp_prof_set_drop_frames(big, MP_PROF_DROP_ALLOCATOR), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_set_drop_frames("xmalloc|g_malloc", MP_PROF_DROP_ALLOCATOR), MP_PROF_OK);
    cr_expect_eq(mp_prof_set_drop_frames("", MP_PROF_DROP_ALLOCATOR), MP_PROF_OK);
}

/* ------------------------------------------------- an encoded profile */

static const char *const fn_names[] = {
    NULL,
    "operator new",                                              /* 1 */
    "std::__new_allocator<int>::allocate",                       /* 2 */
    "std::vector<int, std::allocator<int> >::_M_realloc_insert", /* 3 */
    "main",                                                      /* 4 */
    "site",                                                      /* 5 */
    "malloc",                                                    /* 6 */
};

/* Locations: 1 [operator new], 2 [allocate (inlined) < _M_realloc_insert],
 * 3 [main], 4 [site], 5 [malloc]. */
static const uint64_t loc_lines[][3] = {{0}, {1}, {2, 3}, {4}, {5}, {6}};

static uint8_t *make_profile(const char *drop, size_t *len)
{
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    static char *strs[16];
    size_t ns = 0;
    strs[ns++] = "";
    Perftools__Profiles__Function fn[7], *fnp[6];
    for (size_t i = 1; i <= 6; i++) {
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = i;
        strs[ns] = (char *)fn_names[i];
        fn[i].name = fn[i].system_name = (int64_t)ns++;
        fnp[i - 1] = &fn[i];
    }
    strs[ns] = (char *)drop;
    p.drop_frames = drop != NULL ? (int64_t)ns++ : 0;
    Perftools__Profiles__Location loc[6], *locp[5];
    Perftools__Profiles__Line line[8], *linep[8];
    size_t nl = 0;
    for (size_t i = 1; i <= 5; i++) {
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = i;
        loc[i].address = 0x1000 * i;
        loc[i].line = &linep[nl];
        for (size_t k = 0; k < 3 && loc_lines[i][k] != 0; k++, nl++) {
            perftools__profiles__line__init(&line[nl]);
            line[nl].function_id = loc_lines[i][k];
            linep[nl] = &line[nl];
            loc[i].n_line++;
        }
        locp[i - 1] = &loc[i];
    }
    /* [1 2 3], [5 1], [1 4 3], [4 1 3] */
    static uint64_t ids[4][3] = {{1, 2, 3}, {5, 1, 0}, {1, 4, 3}, {4, 1, 3}};
    static const size_t depth[4] = {3, 2, 3, 3};
    Perftools__Profiles__Sample smp[4], *smpp[4];
    int64_t v[4] = {10, 20, 30, 40};
    for (size_t i = 0; i < 4; i++) {
        perftools__profiles__sample__init(&smp[i]);
        smp[i].location_id = ids[i];
        smp[i].n_location_id = depth[i];
        smp[i].value = &v[i];
        smp[i].n_value = 1;
        smpp[i] = &smp[i];
    }
    p.string_table = strs;
    p.n_string_table = ns;
    p.function = fnp;
    p.n_function = 6;
    p.location = locp;
    p.n_location = 5;
    p.sample = smpp;
    p.n_sample = 4;
    *len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *buf = malloc(*len);
    cr_assert_not_null(buf);
    perftools__profiles__profile__pack(&p, buf);
    return buf;
}

static ut_prof *pruned(const char *drop)
{
    size_t len, olen;
    uint8_t *in = make_profile(drop, &len), *out;
    cr_assert_eq(mp_report_prune_pprof(in, len, &out, &olen), MP_PROF_OK);
    free(in);
    ut_prof *p = ut_decode(out, olen);
    cr_assert_not_null(p);
    free(out);
    return p;
}

Test(drop, encoded_profile_pruned_as_pprof_prunes)
{
    ut_prof *p = pruned(mp_prof_drop_frames_default());
    cr_assert_eq(p->n_sample, 4);
    /* the inlined allocator frame leaves the location; the call stays */
    cr_expect_str_eq(frames_of(p, 0),
                     "std::vector<int, std::allocator<int> >::_M_realloc_insert < main");
    cr_expect_str_eq(frames_of(p, 1), "malloc < operator new", "allocator frames only: whole");
    cr_expect_str_eq(frames_of(p, 2), "site < main");
    cr_expect_str_eq(frames_of(p, 3), "main", "pprof cuts beneath the rootmost match");
    ut_free(p);
}

Test(drop, encoded_profile_without_drop_frames_unchanged)
{
    ut_prof *p = pruned(NULL);
    cr_expect_str_eq(frames_of(p, 0),
                     "operator new < std::__new_allocator<int>::allocate < std::vector<int, "
                     "std::allocator<int> >::_M_realloc_insert < main");
    cr_expect_eq(p->n_location, 5);
    ut_free(p);
    size_t len, olen;
    uint8_t *in = make_profile("site_(new", &len), *out = NULL;
    cr_expect_eq(mp_report_prune_pprof(in, len, &out, &olen), MP_PROF_E_INVALID_CONFIG);
    free(in);
}

/* drop.c matches the default set with shell patterns (no regcomp); the
 * profile names it as a regular expression, for pprof: the two agree. */
Test(drop, default_set_agrees_with_its_regular_expression)
{
    static const char *const names[] = {
        "malloc",
        "calloc",
        "realloc",
        "posix_memalign",
        "__posix_memalign",
        "pvalloc",
        "__libc_malloc",
        "operator new",
        "operator new[]",
        "operator delete",
        "std::__new_allocator<int>::allocate",
        "__gnu_cxx::new_allocator<char>::allocate",
        "std::__1::allocator<int>::allocate",
        "std::allocator_traits<std::allocator<int> >::allocate",
        "std::__1::__libcpp_allocate",
        "std::__1::__libcpp_operator_new<unsigned long>",
        "std::_Vector_base<int, std::allocator<int> >::_M_allocate",
        "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>",
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
        ">::_M_create",
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
        ">::_M_mutate",
        "std::make_unique<Node>",
        "std::make_shared<int>",
        "std::__1::make_shared<int, int>",
        "__rust_alloc",
        "__rustc::__rust_realloc",
        "__rdl_alloc_zeroed",
        "__rg_alloc",
        "alloc::alloc::exchange_malloc",
        "<alloc::alloc::Global>::alloc_impl",
        "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
        "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
        "<alloc::raw_vec::RawVecInner>::finish_grow",
        "alloc::raw_vec::finish_grow",
        "<alloc::boxed::Box<[u8; 4096]>>::new",
        "alloc::boxed::Box<T>::new_uninit",
        "alloc::boxed::box_new_uninit",
        "<alloc::vec::Vec<u8>>::with_capacity",
        "<alloc::vec::Vec<u8>>::with_capacity_in",
        "<alloc::vec::Vec<u32>>::push_mut",
        "<alloc::string::String>::with_capacity",
        "alloc::string::String::push_str",
        "main",
        "shop::Cache<shop::Item>::put",
        "mallocx",
        "xmalloc",
        "std::allocator<int>",
        "",
        "alloc",
        "new",
    };
    const char *def = mp_prof_drop_frames_default();
    char *anchored = malloc(strlen(def) + 5);
    cr_assert_not_null(anchored);
    sprintf(anchored, "^(%s)$", def);
    regex_t rx;
    cr_assert_eq(regcomp(&rx, anchored, REG_EXTENDED | REG_NOSUB), 0);
    size_t matched = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        bool re = regexec(&rx, names[i], 0, NULL, 0) == 0;
        cr_expect_eq(mp_drop_default_matches(names[i]), re, "%s: the regex says %d", names[i], re);
        matched += re;
    }
    cr_expect_gt(matched, 30);
    regfree(&rx);
    free(anchored);
}
