/* SPDX-License-Identifier: MIT */
/* The symbol quality classifier: every threshold of <mimprof/profiling.h>
 * tested on both sides, on profiles encoded here independently of the
 * report encoder. */
#include <criterion/criterion.h>

#include <mimprof/profiling.h>

#include "quality.h"
#include "util.h"

/* Encodes a profile of `frames` one-line locations: the first `named` have
 * a function name, the first `lined` a file name and a line > 0. `inl`
 * extra frames are added as a second (inlined) line to location 1, named
 * and lined. `marker` adds a "[truncated]" location. */
static uint8_t *make_profile(size_t frames, size_t named, size_t lined, size_t inl, bool marker,
                             size_t *len)
{
    static char *strs[] = {"", "f", "a.c", "[truncated]", "g"};
    Perftools__Profiles__Function fn[5];
    Perftools__Profiles__Function *fnp[5];
    /* 1: named+lined, 2: named only, 3: lined only (no name), 4: nothing,
     * 5: the marker. */
    int64_t names[5] = {1, 1, 0, 0, 3}, files[5] = {2, 0, 2, 0, 0};
    for (int i = 0; i < 5; i++) {
        Perftools__Profiles__Function init = PERFTOOLS__PROFILES__FUNCTION__INIT;
        fn[i] = init;
        fn[i].id = (uint64_t)i + 1;
        fn[i].name = names[i];
        fn[i].filename = files[i];
        fnp[i] = &fn[i];
    }
    size_t nloc = frames + (marker ? 1 : 0);
    Perftools__Profiles__Location *locs = calloc(nloc + 1, sizeof *locs);
    Perftools__Profiles__Location **locp = calloc(nloc + 1, sizeof *locp);
    Perftools__Profiles__Line *lines = calloc(nloc + inl + 1, sizeof *lines);
    Perftools__Profiles__Line **linep = calloc(nloc + inl + 1, sizeof *linep);
    size_t li = 0;
    for (size_t i = 0; i < nloc; i++) {
        Perftools__Profiles__Location init = PERFTOOLS__PROFILES__LOCATION__INIT;
        locs[i] = init;
        locs[i].id = i + 1;
        locs[i].address = 0x1000 + i;
        locs[i].line = &linep[li];
        size_t nl = (i == 0 && inl && frames) ? 1 + inl : 1;
        for (size_t k = 0; k < nl; k++) {
            Perftools__Profiles__Line linit = PERFTOOLS__PROFILES__LINE__INIT;
            lines[li] = linit;
            if (i == frames) {
                lines[li].function_id = 5;
            } else if (k > 0) {
                lines[li].function_id = 1;
                lines[li].line = 7;
            } else {
                bool n = i < named, l = i < lined;
                lines[li].function_id = n && l ? 1 : n ? 2 : l ? 3 : 4;
                lines[li].line = l ? 42 : 0;
            }
            linep[li] = &lines[li];
            li++;
        }
        locs[i].n_line = nl;
        locp[i] = &locs[i];
    }
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_string_table = 5;
    p.string_table = strs;
    p.n_function = 5;
    p.function = fnp;
    p.n_location = nloc;
    p.location = locp;
    *len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *buf = malloc(*len + 1);
    perftools__profiles__profile__pack(&p, buf);
    free(locs);
    free(locp);
    free(lines);
    free(linep);
    return buf;
}

static mp_prof_symbol_quality classify(size_t frames, size_t named, size_t lined, size_t inl,
                                       bool marker)
{
    size_t len;
    uint8_t *b = make_profile(frames, named, lined, inl, marker, &len);
    mp_prof_symbol_quality q = (mp_prof_symbol_quality)-1;
    mp_prof_status st = mp_prof_classify_symbols(b, len, &q);
    free(b);
    cr_assert_eq(st, MP_PROF_OK);
    return q;
}

#define Q(frames, named, lined) classify(frames, named, lined, 0, false)

Test(report_classify, functions_threshold_95_both_sides)
{
    /* Lines well below 80% so only the function share decides. */
    cr_assert_eq(Q(100, 95, 0), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(Q(100, 94, 0), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(Q(1000, 950, 0), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(Q(1000, 949, 0), MP_PROF_QUALITY_PARTIAL);
    /* 19/20 = 95% exactly; 18/20 = 90%. */
    cr_assert_eq(Q(20, 19, 0), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(Q(20, 18, 0), MP_PROF_QUALITY_PARTIAL);
    /* No rounding up: 37/39 = 94.87%. */
    cr_assert_eq(Q(39, 37, 0), MP_PROF_QUALITY_PARTIAL);
}

Test(report_classify, lines_threshold_80_both_sides)
{
    cr_assert_eq(Q(100, 100, 80), MP_PROF_QUALITY_FULL);
    cr_assert_eq(Q(100, 100, 79), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(Q(1000, 950, 800), MP_PROF_QUALITY_FULL);
    cr_assert_eq(Q(1000, 950, 799), MP_PROF_QUALITY_FUNCTIONS);
    /* Lines without enough functions are never FULL. */
    cr_assert_eq(Q(1000, 949, 1000), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(Q(5, 5, 4), MP_PROF_QUALITY_FULL);
    cr_assert_eq(Q(5, 5, 3), MP_PROF_QUALITY_FUNCTIONS);
}

Test(report_classify, partial_threshold_20_both_sides)
{
    cr_assert_eq(Q(100, 20, 0), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(Q(100, 19, 0), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(Q(1000, 200, 200), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(Q(1000, 199, 1000), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(Q(5, 1, 0), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(Q(6, 1, 0), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(Q(100, 0, 0), MP_PROF_QUALITY_ADDRESSES_ONLY);
}

Test(report_classify, no_frames_is_addresses_only)
{
    cr_assert_eq(Q(0, 0, 0), MP_PROF_QUALITY_ADDRESSES_ONLY);
    mp_prof_symbol_quality q = MP_PROF_QUALITY_FULL;
    cr_assert_eq(mp_prof_classify_symbols((const uint8_t *)"", 0, &q), MP_PROF_OK);
    cr_assert_eq(q, MP_PROF_QUALITY_ADDRESSES_ONLY);
}

Test(report_classify, inlined_lines_are_frames)
{
    /* 19 named of 20 one-line locations = 95%; one location gains 20
     * inlined named frames: 39/40 -> still FUNCTIONS. With 18 of 20 named
     * (90%) the 20 extra named frames lift it to 38/40 = 95%. */
    cr_assert_eq(classify(20, 18, 0, 0, false), MP_PROF_QUALITY_PARTIAL);
    cr_assert_eq(classify(20, 18, 0, 20, false), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(classify(20, 18, 0, 19, false), MP_PROF_QUALITY_PARTIAL);
}

Test(report_classify, truncation_marker_not_counted)
{
    /* 19/20 named; the marker would make it 20/21 if it counted, and 1/5
     * -> 2/6 would cross 20%. */
    cr_assert_eq(classify(5, 0, 0, 0, true), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(classify(6, 1, 0, 0, true), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(classify(20, 18, 0, 0, true), MP_PROF_QUALITY_PARTIAL);
}

Test(report_classify, counts_rule_exact)
{
    cr_assert_eq(mp_quality_from_counts(0, 0, 0), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(mp_quality_from_counts(1, 1, 1), MP_PROF_QUALITY_FULL);
    cr_assert_eq(mp_quality_from_counts(1, 1, 0), MP_PROF_QUALITY_FUNCTIONS);
    cr_assert_eq(mp_quality_from_counts(1, 0, 1), MP_PROF_QUALITY_ADDRESSES_ONLY);
    cr_assert_eq(mp_quality_from_counts(UINT64_MAX, UINT64_MAX, UINT64_MAX), MP_PROF_QUALITY_FULL);
    cr_assert_eq(mp_quality_from_counts(10, 20, 20), MP_PROF_QUALITY_FULL);
}

Test(report_classify, rejects_undecodable_bytes)
{
    mp_prof_symbol_quality q;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(mp_prof_classify_symbols(junk, sizeof junk, &q), MP_PROF_E_INVALID_CONFIG);
    /* A truncated valid profile. */
    size_t len;
    uint8_t *b = make_profile(10, 10, 10, 0, false, &len);
    cr_assert_eq(mp_prof_classify_symbols(b, len - 1, &q), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_classify_symbols(NULL, 3, &q), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_classify_symbols(b, len, NULL), MP_PROF_E_INVALID_CONFIG);
    free(b);
    /* A function name outside the string table. */
    Perftools__Profiles__Function f = PERFTOOLS__PROFILES__FUNCTION__INIT, *fp = &f;
    f.id = 1;
    f.name = 99;
    char *strs[] = {""};
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_string_table = 1;
    p.string_table = strs;
    p.n_function = 1;
    p.function = &fp;
    uint8_t buf[256];
    size_t n = perftools__profiles__profile__pack(&p, buf);
    cr_assert_eq(mp_prof_classify_symbols(buf, n, &q), MP_PROF_E_INVALID_CONFIG);
}

Test(report_classify, names)
{
    cr_assert_str_eq(mp_prof_symbol_quality_name(MP_PROF_QUALITY_FULL), "FULL");
    cr_assert_str_eq(mp_prof_symbol_quality_name(MP_PROF_QUALITY_FUNCTIONS), "FUNCTIONS");
    cr_assert_str_eq(mp_prof_symbol_quality_name(MP_PROF_QUALITY_PARTIAL), "PARTIAL");
    cr_assert_str_eq(mp_prof_symbol_quality_name(MP_PROF_QUALITY_ADDRESSES_ONLY), "ADDRESSES_ONLY");
}
