/* SPDX-License-Identifier: MIT */
/* The pprof encoder (report_builder.h): structure, aggregation, rounding
 * once, labels, the truncation marker; decoded by the test's own
 * unpacker, by `protoc --decode` and by `go tool pprof`. */
#include <criterion/criterion.h>
#include <math.h>

#include "report_builder.h"
#include "report_internal.h"
#include "sites.h"
#include "util.h"

static mp_report_options opts(mp_prof_symbolize s)
{
    mp_report_options o = {.period = 524288,
                           .time_nanos = 1700000000000000000ll,
                           .duration_nanos = 10000000000ll,
                           .symbolize = s};
    return o;
}

static ut_prof *finish(mp_report_builder *b, uint8_t **raw, size_t *len)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    cr_assert_eq(mp_report_finish(b, &buf, &n), MP_PROF_OK);
    cr_assert_not_null(buf);
    ut_prof *p = ut_decode(buf, n);
    cr_assert_not_null(p, "the encoder's output decodes");
    if (raw) {
        *raw = buf;
        *len = n;
    } else {
        free(buf);
    }
    return p;
}

static bool has_delta_label(const ut_prof *p, const Perftools__Profiles__Sample *s)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(ut_str(p, s->label[i]->key), "__delta__") == 0 &&
            strcmp(ut_str(p, s->label[i]->str), "false") == 0)
            return true;
    return false;
}

Test(report_encode, header_types_period_strings)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = opts(MP_PROF_SYMBOLIZE_NONE);
    mp_report_builder *b = mp_report_begin(c, &o);
    cr_assert_not_null(b);
    ut_prof *p = finish(b, NULL, NULL);
    cr_assert_eq(p->n_sample_type, 4);
    static const char *want[4][2] = {{"alloc_objects", "count"},
                                     {"alloc_space", "bytes"},
                                     {"inuse_objects", "count"},
                                     {"inuse_space", "bytes"}};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(ut_str(p, p->sample_type[i]->type), want[i][0]);
        cr_assert_str_eq(ut_str(p, p->sample_type[i]->unit), want[i][1]);
    }
    cr_assert_not_null(p->period_type);
    cr_assert_str_eq(ut_str(p, p->period_type->type), "space");
    cr_assert_str_eq(ut_str(p, p->period_type->unit), "bytes");
    cr_assert_eq(p->period, 524288);
    cr_assert_eq(p->time_nanos, 1700000000000000000ll);
    cr_assert_eq(p->duration_nanos, 10000000000ll);
    cr_assert_geq(p->n_string_table, 1);
    cr_assert_str_eq(p->string_table[0], "");
    cr_assert_eq(p->n_sample, 0);
    /* Mappings exist even without samples; mapping[0] is the main binary. */
    cr_assert_geq(p->n_mapping, 1);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    cr_assert_str_eq(ut_str(p, p->mapping[0]->filename), exe);
    cr_assert_eq(p->mapping[0]->id, 1);
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_encode, aggregation_labels_and_rounding_once)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = opts(MP_PROF_SYMBOLIZE_NONE);
    mp_report_builder *b = mp_report_begin(c, &o);
    uintptr_t s1[] = {0x5001, 0x5101, 0x5201};
    uintptr_t s2[] = {0x5001, 0x5301};
    double v_int[4] = {0.4, 0.6, 0, 0};
    double v_live[4] = {0, 0, 0.6, 1000.5};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(mp_report_add(b, s1, 3, false, v_int, true), MP_PROF_OK);
    /* Same stack, live: a separate sample without the label. */
    cr_assert_eq(mp_report_add(b, s1, 3, false, v_live, false), MP_PROF_OK);
    cr_assert_eq(mp_report_add(b, s1, 3, false, v_live, false), MP_PROF_OK);
    cr_assert_eq(mp_report_add(b, s2, 2, false, v_int, true), MP_PROF_OK);
    /* A prefix is a different stack. */
    cr_assert_eq(mp_report_add(b, s1, 2, false, v_int, true), MP_PROF_OK);
    ut_prof *p = finish(b, NULL, NULL);
    cr_assert_eq(p->n_sample, 4);
    /* Insertion order: s1 interval, s1 live, s2 interval, s1[0..2) interval. */
    const Perftools__Profiles__Sample *si = p->sample[0], *sl = p->sample[1];
    cr_assert_eq(si->n_value, 4);
    /* 3 x 0.4 = 1.2 -> 1 (rounding each add would give 0); 3 x 0.6 = 1.8 -> 2. */
    cr_assert_eq(si->value[0], 1);
    cr_assert_eq(si->value[1], 2);
    cr_assert_eq(si->value[2], 0);
    cr_assert_eq(si->value[3], 0);
    cr_assert(has_delta_label(p, si));
    cr_assert_eq(si->n_label, 1);
    /* 2 x 0.6 = 1.2 -> 1 (each rounded: 2); 2 x 1000.5 = 2001. */
    cr_assert_eq(sl->value[2], 1);
    cr_assert_eq(sl->value[3], 2001);
    cr_assert_eq(sl->n_label, 0);
    cr_assert_eq(p->sample[2]->n_location_id, 2);
    cr_assert_eq(p->sample[3]->n_location_id, 2);
    /* Ids: non-zero, unique, every reference resolves; leaf first. */
    cr_assert_eq(p->n_location, 4);
    for (size_t i = 0; i < p->n_location; i++) {
        cr_assert_neq(p->location[i]->id, 0);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(p->location[i]->id, p->location[j]->id);
    }
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
            cr_assert_not_null(ut_loc(p, p->sample[i]->location_id[k]));
    /* Addresses are return address - 1 (inside the call). */
    cr_assert_eq(ut_loc(p, si->location_id[0])->address, 0x5000);
    cr_assert_eq(ut_loc(p, si->location_id[2])->address, 0x5200);
    /* Fake addresses: no mapping. */
    cr_assert_eq(ut_loc(p, si->location_id[0])->mapping_id, 0);
    cr_assert_eq(p->n_function, 0);
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_encode, truncated_stack_marked)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = opts(MP_PROF_SYMBOLIZE_FUNCTIONS);
    mp_report_builder *b = mp_report_begin(c, &o);
    uintptr_t s[] = {0x7001, 0x7101};
    double v[4] = {1, 100, 1, 100};
    cr_assert_eq(mp_report_add(b, s, 2, true, v, true), MP_PROF_OK);
    cr_assert_eq(mp_report_add(b, s, 2, false, v, true), MP_PROF_OK);
    cr_assert_eq(mp_report_add(b, s, 2, true, v, false), MP_PROF_OK);
    ut_prof *p = finish(b, NULL, NULL);
    cr_assert_eq(p->n_sample, 3);
    const Perftools__Profiles__Sample *t = p->sample[0], *u = p->sample[1];
    cr_assert_eq(t->n_location_id, 3);
    cr_assert_eq(u->n_location_id, 2);
    const Perftools__Profiles__Location *m = ut_loc(p, t->location_id[2]);
    cr_assert_not_null(m);
    cr_assert_eq(m->n_line, 1);
    cr_assert_str_eq(ut_line_fn(p, m, 0), "[truncated]");
    cr_assert_neq(m->id, 0);
    /* One marker location shared by every truncated stack. */
    cr_assert_eq(p->sample[2]->location_id[2], t->location_id[2]);
    ut_free(p);
    mp_report_cache_free(c);
}

Test(report_encode, empty_stack_and_large_values)
{
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = opts(MP_PROF_SYMBOLIZE_NONE);
    mp_report_builder *b = mp_report_begin(c, &o);
    double v[4] = {1e30, -1e30, NAN, 2.5};
    cr_assert_eq(mp_report_add(b, NULL, 0, false, v, false), MP_PROF_OK);
    ut_prof *p = finish(b, NULL, NULL);
    cr_assert_eq(p->n_sample, 1);
    cr_assert_eq(p->sample[0]->n_location_id, 0);
    cr_assert_eq(p->sample[0]->value[0], INT64_MAX);
    cr_assert_eq(p->sample[0]->value[1], INT64_MIN);
    cr_assert_eq(p->sample[0]->value[2], 0);
    cr_assert_eq(p->sample[0]->value[3], 3); /* llround: half away from zero */
    ut_free(p);
    mp_report_abort(NULL);
    mp_report_abort(mp_report_begin(c, &o));
    mp_report_cache_free(c);
}

/* A profile of the known sites, symbolized with `mode`. */
static uint8_t *sites_profile(mp_report_cache *c, mp_prof_symbolize mode, size_t *len)
{
    uintptr_t pcs[3];
    sites_three_pcs(pcs);
    mp_report_options o = opts(mode);
    mp_report_builder *b = mp_report_begin(c, &o);
    double v[4] = {10, 10240, 5, 5120};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(mp_report_add(b, &pcs[i], 1, false, v, true), MP_PROF_OK);
    uint8_t *buf;
    cr_assert_eq(mp_report_finish(b, &buf, len), MP_PROF_OK);
    return buf;
}

Test(report_encode, protoc_decodes_it)
{
    mp_report_cache *c = mp_report_cache_new();
    size_t len;
    uint8_t *buf = sites_profile(c, MP_PROF_SYMBOLIZE_FUNCTIONS, &len);
    char *dir = ut_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/p.pb", dir);
    cr_assert(ut_write(path, buf, len));
    int st = -1;
    char *out = ut_run(
        &st, "'%s' --decode perftools.profiles.Profile -I '%s' '%s/profile.proto' < '%s' 2>&1",
        PROTOC, PROTO_DIR, PROTO_DIR, path);
    cr_assert_not_null(out);
    cr_assert_eq(st, 0, "protoc failed: %s", out);
    cr_assert_not_null(strstr(out, "string_table: \"alloc_objects\""), "%s", out);
    cr_assert_not_null(strstr(out, "string_table: \"__delta__\""));
    cr_assert_not_null(strstr(out, "string_table: \"report_site_alpha\""));
    cr_assert_not_null(strstr(out, "period: 524288"));
    cr_assert_not_null(strstr(out, "build_id:"));
    free(out);
    free(ut_run(&st, "rm -rf '%s'", dir));
    free(dir);
    free(buf);
    mp_report_cache_free(c);
}

Test(report_encode, go_tool_pprof_reads_it, .timeout = 240)
{
    mp_report_cache *c = mp_report_cache_new();
    size_t len;
    uint8_t *buf = sites_profile(c, MP_PROF_SYMBOLIZE_LINES, &len);
    char *dir = ut_tmpdir();
    char path[4096];
    snprintf(path, sizeof path, "%s/p.pb", dir);
    cr_assert(ut_write(path, buf, len));
    char *env = ut_go_env(dir);
    int st = -1;
    char *top = ut_run(
        &st, "env %s '%s' tool pprof -symbolize=none -sample_index=alloc_space -top '%s' 2>&1", env,
        GO, path);
    cr_assert_not_null(top);
    cr_assert_eq(st, 0, "go tool pprof -top failed: %s", top);
    cr_assert_not_null(strstr(top, "report_site_alpha"), "%s", top);
#if MP_HAVE_LIBDW
    cr_assert_not_null(strstr(top, "report_inlined_beta"), "%s", top);
#endif
    cr_assert_not_null(strstr(top, "mp_prof_sample_hook"), "%s", top);
    /* 3 samples of 10240 bytes */
    cr_assert_not_null(strstr(top, "30kB"), "%s", top);
    char *raw = ut_run(&st, "env %s '%s' tool pprof -symbolize=none -raw '%s' 2>&1", env, GO, path);
    cr_assert_eq(st, 0, "go tool pprof -raw failed: %s", raw);
    cr_assert_not_null(
        strstr(raw, "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"),
        "%s", raw);
    cr_assert_not_null(strstr(raw, "__delta__:[false]"), "%s", raw);
    cr_assert_not_null(strstr(raw, "report_outer_gamma"), "%s", raw);
#if MP_HAVE_LIBDW
    cr_assert_not_null(strstr(raw, "sites.c:"), "%s", raw);
#endif
    free(top);
    free(raw);
    free(env);
    free(ut_run(&st, "rm -rf '%s'", dir));
    free(dir);
    free(buf);
    mp_report_cache_free(c);
}
