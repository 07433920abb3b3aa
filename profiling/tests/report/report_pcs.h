/* SPDX-License-Identifier: MIT */
/* Criterion helpers of the tests that report known return addresses
 * through the builder and look their locations up (test_symbolize.c,
 * test_cxx_names.c). */
#ifndef MIMPROF_REPORT_TEST_REPORT_PCS_H
#define MIMPROF_REPORT_TEST_REPORT_PCS_H

#include <criterion/criterion.h>

#include "report_builder.h"
#include "report_internal.h"
#include "util.h"

/* One report of `n` one-frame samples at `pcs`, decoded. */
static inline ut_prof *report_pcs(mp_report_cache *c, const uintptr_t *pcs, size_t n,
                                  mp_prof_symbolize mode)
{
    mp_report_options o = {.period = 4096, .symbolize = mode};
    mp_report_builder *b = mp_report_begin(c, &o);
    cr_assert_not_null(b);
    double v[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(mp_report_add(b, &pcs[i], 1, false, v, false), MP_PROF_OK);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(mp_report_finish(b, &buf, &len), MP_PROF_OK);
    ut_prof *p = ut_decode(buf, len);
    cr_assert_not_null(p);
    free(buf);
    return p;
}

/* The location of return address `pc` (at pc - 1: inside the call). */
static inline const Perftools__Profiles__Location *loc_for(const ut_prof *p, uintptr_t pc)
{
    const Perftools__Profiles__Location *l = ut_loc_at(p, pc - 1);
    cr_assert_not_null(l, "a location at %#lx", (unsigned long)(pc - 1));
    return l;
}

#endif
