/* SPDX-License-Identifier: MIT */
/* The public foreign-stack pprof builder (<mimprof/profiling_pprof.h>):
 * given mappings and this process's, sample types, summing and rounding
 * once, the cut of an allocator's frames, comments, names, refusals. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <string.h>

#include <mimprof/profiling_pprof.h>

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;

static Profile *finish(mp_prof_pprof *p)
{
    uint8_t *pb;
    size_t len;
    cr_assert_eq(mp_prof_pprof_finish(p, &pb, &len), MP_PROF_OK);
    Profile *pr = perftools__profiles__profile__unpack(NULL, len, pb);
    cr_assert(pr != NULL, "the profile decodes");
    mp_prof_buffer_free(pb);
    return pr;
}

static const char *str(const Profile *p, int64_t i)
{
    cr_assert(i >= 0 && (size_t)i < p->n_string_table);
    return p->string_table[i];
}

static const Perftools__Profiles__Location *loc(const Profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    cr_assert_fail("no location %llu", (unsigned long long)id);
    return NULL;
}

/* Two objects of a made-up address space: an application and an
 * allocator. */
static mp_prof_symbolizer *made_up(void)
{
    static const mp_prof_mapping maps[2] = {
        {.start = 0x400000, .limit = 0x500000, .file_offset = 0, .path = "app", .build_id = "ab01"},
        {.start = 0x7f0000, .limit = 0x800000, .file_offset = 0x1000, .path = "liballoc.so"},
    };
    mp_prof_symbolizer *s;
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(mp_prof_symbolizer_add_mapping(s, &maps[i]), MP_PROF_OK);
    return s;
}

Test(foreign_pprof, given_mappings_sums_rounds_and_cuts)
{
    mp_prof_symbolizer *s = made_up();
    mp_prof_pprof_options o;
    mp_prof_pprof_options_init(&o);
    cr_expect(o.inuse_only);
    cr_expect_eq(o.symbolize, MP_PROF_SYMBOLIZE_FUNCTIONS);
    o.period = 4096;
    o.time_nanos = 7;
    o.duration_nanos = 9;
    o.symbolize = MP_PROF_SYMBOLIZE_NONE;
    o.cut_object_of = 0x7f0010;
    mp_prof_pprof *p;
    cr_assert_eq(mp_prof_pprof_begin(s, &o, &p), MP_PROF_OK);
    /* the allocator's two frames lead; summed twice, 0.4 + 0.4 rounds to 1 */
    const uintptr_t st[] = {0x7f0100, 0x7f0200, 0x401001, 0x402001};
    const double v[2] = {0.4, 100.4};
    cr_assert_eq(mp_prof_pprof_add(p, st, 4, v, 2), MP_PROF_OK);
    cr_assert_eq(mp_prof_pprof_add(p, st, 4, v, 2), MP_PROF_OK);
    /* nothing but the allocator: kept whole */
    cr_assert_eq(mp_prof_pprof_add(p, st, 2, v, 2), MP_PROF_OK);
    cr_expect_eq(mp_prof_pprof_add(p, st, 4, v, 4), MP_PROF_E_INVALID_CONFIG, "nvalues");
    cr_assert_eq(mp_prof_pprof_comment(p, "hello"), MP_PROF_OK);
    Profile *pr = finish(p);
    cr_assert_eq(pr->n_sample_type, 2);
    cr_expect_str_eq(str(pr, pr->sample_type[0]->type), "inuse_objects");
    cr_expect_str_eq(str(pr, pr->sample_type[1]->type), "inuse_space");
    cr_expect_str_eq(str(pr, pr->period_type->type), "space");
    cr_expect_eq(pr->period, 4096);
    cr_expect_eq(pr->time_nanos, 7);
    cr_expect_eq(pr->duration_nanos, 9);
    cr_assert_eq(pr->n_comment, 1);
    cr_expect_str_eq(str(pr, pr->comment[0]), "hello");
    cr_assert_eq(pr->n_mapping, 2);
    cr_expect_str_eq(str(pr, pr->mapping[0]->build_id), "ab01");
    cr_expect_str_eq(str(pr, pr->mapping[1]->filename), "liballoc.so");
    cr_expect_eq(pr->mapping[1]->file_offset, 0x1000);
    cr_assert_eq(pr->n_sample, 2);
    const Perftools__Profiles__Sample *a = pr->sample[0], *b = pr->sample[1];
    cr_assert_eq(a->n_location_id, 2, "the allocator's frames are cut");
    cr_expect_eq(a->value[0], 1);
    cr_expect_eq(a->value[1], 201);
    const Perftools__Profiles__Location *leaf = loc(pr, a->location_id[0]);
    cr_expect_eq(leaf->address, 0x401000, "moved back into the call");
    cr_expect_eq(leaf->mapping_id, 1);
    cr_expect_eq(leaf->n_line, 0, "symbolize none");
    cr_expect_eq(b->n_location_id, 2);
    cr_expect_eq(loc(pr, b->location_id[0])->mapping_id, 2);
    perftools__profiles__profile__free_unpacked(pr, NULL);
    mp_prof_symbolizer_free(s);
}

Test(foreign_pprof, four_sample_types)
{
    mp_prof_symbolizer *s = made_up();
    mp_prof_pprof_options o;
    mp_prof_pprof_options_init(&o);
    o.inuse_only = false;
    mp_prof_pprof *p;
    cr_assert_eq(mp_prof_pprof_begin(s, &o, &p), MP_PROF_OK);
    const uintptr_t st[] = {0x401001};
    const double v[4] = {1, 2, 3, 4};
    cr_expect_eq(mp_prof_pprof_add(p, st, 1, v, 2), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_pprof_add(p, st, 1, v, 4), MP_PROF_OK);
    Profile *pr = finish(p);
    cr_assert_eq(pr->n_sample_type, 4);
    cr_expect_str_eq(str(pr, pr->sample_type[0]->type), "alloc_objects");
    cr_assert_eq(pr->n_sample, 1);
    for (int k = 0; k < 4; k++)
        cr_expect_eq(pr->sample[0]->value[k], k + 1);
    perftools__profiles__profile__free_unpacked(pr, NULL);
    mp_prof_symbolizer_free(s);
}

__attribute__((noinline, visibility("default"))) uintptr_t foreign_pprof_site(void)
{
    __asm__ volatile("" ::: "memory");
    return (uintptr_t)__builtin_return_address(0);
}

/* Calls foreign_pprof_site from inside a named function: the return
 * address lies in foreign_pprof_caller. */
__attribute__((noinline, visibility("default"))) uintptr_t foreign_pprof_caller(void)
{
    uintptr_t r = foreign_pprof_site();
    __asm__ volatile("" ::: "memory");
    return r;
}

/* This process's objects and ELF symbols (the ELF backend; the others
 * are checked by test_platform.c). */
Test(foreign_pprof, this_process_is_symbolized)
{
    if (!TEST_PLATFORM_ELF)
        cr_skip_test("not the ELF platform backend");
    mp_prof_symbolizer *s;
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    mp_prof_pprof_options o;
    mp_prof_pprof_options_init(&o);
    uintptr_t pc = foreign_pprof_caller();
    for (int round = 0; round < 2; round++) { /* the second from the cache */
        mp_prof_pprof *p;
        cr_assert_eq(mp_prof_pprof_begin(s, &o, &p), MP_PROF_OK);
        const double v[2] = {1, 64};
        cr_assert_eq(mp_prof_pprof_add(p, &pc, 1, v, 2), MP_PROF_OK);
        Profile *pr = finish(p);
        cr_assert_eq(pr->n_sample, 1);
        const Perftools__Profiles__Location *l = loc(pr, pr->sample[0]->location_id[0]);
        cr_assert_geq(l->n_line, 1);
        const Perftools__Profiles__Function *f = NULL;
        for (size_t i = 0; i < pr->n_function; i++)
            if (pr->function[i]->id == l->line[0]->function_id)
                f = pr->function[i];
        cr_assert(f != NULL);
        cr_expect_str_eq(str(pr, f->name), "foreign_pprof_caller");
        cr_expect_str_eq(str(pr, f->system_name), "foreign_pprof_caller");
        cr_assert_geq(pr->n_mapping, 2, "this process's objects");
        cr_expect_str_neq(str(pr, pr->mapping[0]->build_id), "", "the program's build-id");
        perftools__profiles__profile__free_unpacked(pr, NULL);
    }
    /* this process's objects were read: too late to give mappings */
    mp_prof_mapping m = {.start = 0x1000, .limit = 0x2000, .path = "x"};
    cr_expect_eq(mp_prof_symbolizer_add_mapping(s, &m), MP_PROF_E_INVALID_CONFIG);
    mp_prof_symbolizer_free(s);
}

Test(foreign_pprof, refusals)
{
    mp_prof_symbolizer *s;
    cr_expect_eq(mp_prof_symbolizer_new(NULL), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_symbolizer_new(&s), MP_PROF_OK);
    mp_prof_mapping m = {.start = 0x1000, .limit = 0x3000, .path = "x"};
    cr_expect_eq(mp_prof_symbolizer_add_mapping(s, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_symbolizer_add_mapping(s, &m), MP_PROF_OK);
    mp_prof_mapping overlap = {.start = 0x2000, .limit = 0x4000, .path = "y"};
    cr_expect_eq(mp_prof_symbolizer_add_mapping(s, &overlap), MP_PROF_E_INVALID_CONFIG);
    mp_prof_mapping empty = {.start = 0x5000, .limit = 0x5000, .path = "z"};
    cr_expect_eq(mp_prof_symbolizer_add_mapping(s, &empty), MP_PROF_E_INVALID_CONFIG);
    mp_prof_pprof_options o;
    mp_prof_pprof_options_init(&o);
    mp_prof_pprof *p;
    cr_expect_eq(mp_prof_pprof_begin(NULL, &o, &p), MP_PROF_E_INVALID_CONFIG);
    o.symbolize = (mp_prof_symbolize)7;
    cr_expect_eq(mp_prof_pprof_begin(s, &o, &p), MP_PROF_E_INVALID_CONFIG);
    o.symbolize = MP_PROF_SYMBOLIZE_NONE;
    cr_assert_eq(mp_prof_pprof_begin(s, &o, &p), MP_PROF_OK);
    const double v[2] = {1, 1};
    cr_expect_eq(mp_prof_pprof_add(p, NULL, 1, v, 2), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_pprof_comment(p, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_pprof_finish(NULL, NULL, NULL), MP_PROF_E_INVALID_CONFIG);
    mp_prof_pprof_abort(p);
    mp_prof_pprof_abort(NULL);
    mp_prof_symbolizer_free(s);
    mp_prof_symbolizer_free(NULL);
}
