/* SPDX-License-Identifier: MIT */
/* Unit tests of the mimprof command's internals: size/duration parsing,
 * value formatting, display-name sanitizing, and the pprof reader on
 * crafted, corrupt and oversized inputs (runs under ASan/UBSan). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ages.h"
#include "pprof_reader.h"
#include "profile.pb-c.h"
#include "units.h"
#include "views.h"

Test(tool_units, sizes)
{
    uint64_t v;
    cr_expect(mpt_parse_size("4096", &v) && v == 4096);
    cr_expect(mpt_parse_size("512k", &v) && v == 524288);
    cr_expect(mpt_parse_size("512K", &v) && v == 524288);
    cr_expect(mpt_parse_size("64KiB", &v) && v == 65536);
    cr_expect(mpt_parse_size("64kb", &v) && v == 65536);
    cr_expect(mpt_parse_size("1m", &v) && v == 1048576);
    cr_expect(mpt_parse_size("2G", &v) && v == 2147483648u);
    cr_expect(mpt_parse_size("10B", &v) && v == 10);
    const char *bad[] = {
        "",  "k", "-1", "1x", "1kk", "1.5m", " 1", "1 ", "99999999999999999999", "17179869184g",
        NULL};
    for (int i = 0; bad[i] != NULL; i++)
        cr_expect(!mpt_parse_size(bad[i], &v), "accepted '%s'", bad[i]);
    cr_expect(!mpt_parse_size(NULL, &v));
}

Test(tool_units, thresholds)
{
    uint64_t b;
    unsigned pct;
    cr_expect(mpt_parse_threshold("100m", &b, &pct) && b == 100u << 20 && pct == 0);
    cr_expect(mpt_parse_threshold("90%", &b, &pct) && b == 0 && pct == 90);
    cr_expect(mpt_parse_threshold("100%", &b, &pct) && pct == 100);
    cr_expect(mpt_parse_threshold("1%", &b, &pct) && pct == 1);
    const char *bad[] = {"", "%", "0%", "101%", "1000%", "9.5%", "-5%", "0", "x", "10%%", NULL};
    for (int i = 0; bad[i] != NULL; i++)
        cr_expect(!mpt_parse_threshold(bad[i], &b, &pct), "accepted '%s'", bad[i]);
    cr_expect(!mpt_parse_threshold(NULL, &b, &pct));
}

Test(tool_units, durations)
{
    uint64_t v;
    cr_expect(mpt_parse_duration_ms("0", &v) && v == 0);
    cr_expect(mpt_parse_duration_ms("10", &v) && v == 10000);
    cr_expect(mpt_parse_duration_ms("10s", &v) && v == 10000);
    cr_expect(mpt_parse_duration_ms("500ms", &v) && v == 500);
    cr_expect(mpt_parse_duration_ms("1.5s", &v) && v == 1500);
    cr_expect(mpt_parse_duration_ms("2m", &v) && v == 120000);
    cr_expect(mpt_parse_duration_ms("1h", &v) && v == 3600000);
    cr_expect(mpt_parse_duration_ms("0.25", &v) && v == 250);
    const char *bad[] = {"", "s", "-1s", "1d", "1.s", ".5s", "1 s", "99999999999999999999h", NULL};
    for (int i = 0; bad[i] != NULL; i++)
        cr_expect(!mpt_parse_duration_ms(bad[i], &v), "accepted '%s'", bad[i]);
}

Test(tool_units, formatting)
{
    char b[32];
    mpt_format_value(b, sizeof b, 0, "bytes");
    cr_expect_str_eq(b, "0B");
    mpt_format_value(b, sizeof b, 1023, "bytes");
    cr_expect_str_eq(b, "1023B");
    mpt_format_value(b, sizeof b, 1536, "bytes");
    cr_expect_str_eq(b, "1.50KiB");
    mpt_format_value(b, sizeof b, 32.0 * 1048576, "bytes");
    cr_expect_str_eq(b, "32.00MiB");
    mpt_format_value(b, sizeof b, -3.0 * 1073741824, "bytes");
    cr_expect_str_eq(b, "-3.00GiB");
    mpt_format_value(b, sizeof b, 1234, "count");
    cr_expect_str_eq(b, "1234");
    mpt_format_value(b, sizeof b, 12300000, "nanoseconds");
    cr_expect_str_eq(b, "12.30ms");
    mpt_format_value(b, sizeof b, 2, "seconds");
    cr_expect_str_eq(b, "2.00s");
    mpt_format_value(b, 4, 123456789, "count"); /* truncated, terminated */
    cr_expect_eq(strlen(b), 3);
}

Test(tool_units, display_names)
{
    char b[64];
    cr_expect_str_eq(mpt_display_name("plain", b, sizeof b, 100), "plain");
    cr_expect_str_eq(mpt_display_name("a\x1b[31m\tb\x7f", b, sizeof b, 100), "a?[31m?b?");
    cr_expect_str_eq(mpt_display_name("bad\xff\xfe", b, sizeof b, 100), "bad??");
    cr_expect_str_eq(mpt_display_name("\xc3\xa9t\xc3\xa9", b, sizeof b, 100), "\xc3\xa9t\xc3\xa9");
    cr_expect_str_eq(mpt_display_name("\xc0\xaf overlong", b, sizeof b, 100), "?? overlong");
    cr_expect_str_eq(mpt_display_name("\xed\xa0\x80 surrogate", b, sizeof b, 100), "??? surrogate");
    cr_expect_str_eq(mpt_display_name("abcdefghij", b, sizeof b, 6), "abcd..");
    cr_expect_str_eq(mpt_display_name("abcdef", b, sizeof b, 6), "abcdef");
    cr_expect_str_eq(mpt_display_name("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", b, sizeof b, 3),
                     "\xc3\xa9..");
    char small[10];
    mpt_display_name("a very long name indeed", small, sizeof small, 100);
    cr_expect_str_eq(small, "..");
    cr_expect_lt(strlen(small), sizeof small);
}

/* ---- reader ---------------------------------------------------------- */

typedef Perftools__Profiles__Profile PB;

/* A profile: stacks (leaf first) of function ids 1..3, four values each. */
static uint8_t *build(size_t *len, void (*tweak)(PB *))
{
    static char *strings[] = {"", "inuse_space", "bytes", "leaf", "mid", "main", "count"};
    Perftools__Profiles__ValueType vt[2] = {PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                            PERFTOOLS__PROFILES__VALUE_TYPE__INIT};
    vt[0].type = 6, vt[0].unit = 6;
    vt[1].type = 1, vt[1].unit = 2;
    Perftools__Profiles__ValueType *vts[2] = {&vt[0], &vt[1]};
    Perftools__Profiles__Function fn[3];
    Perftools__Profiles__Function *fns[3];
    Perftools__Profiles__Line ln[3];
    Perftools__Profiles__Line *lns[3];
    Perftools__Profiles__Location loc[3];
    Perftools__Profiles__Location *locs[3];
    for (int i = 0; i < 3; i++) {
        perftools__profiles__function__init(&fn[i]);
        fn[i].id = (uint64_t)(i + 1) * 10;
        fn[i].name = 3 + i;
        fns[i] = &fn[i];
        perftools__profiles__line__init(&ln[i]);
        ln[i].function_id = fn[i].id;
        lns[i] = &ln[i];
        perftools__profiles__location__init(&loc[i]);
        loc[i].id = (uint64_t)(i + 1) * 100;
        loc[i].n_line = 1;
        loc[i].line = &lns[i];
        locs[i] = &loc[i];
    }
    /* sample 0: leaf<-mid<-main, sample 1: mid<-mid<-main (recursion) */
    uint64_t st0[] = {100, 200, 300}, st1[] = {200, 200, 300};
    int64_t v0[] = {1, 1000}, v1[] = {2, 24};
    Perftools__Profiles__Sample s[2];
    Perftools__Profiles__Sample *ss[2] = {&s[0], &s[1]};
    perftools__profiles__sample__init(&s[0]);
    perftools__profiles__sample__init(&s[1]);
    s[0].n_location_id = 3, s[0].location_id = st0, s[0].n_value = 2, s[0].value = v0;
    s[1].n_location_id = 3, s[1].location_id = st1, s[1].n_value = 2, s[1].value = v1;
    PB p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_sample_type = 2, p.sample_type = vts;
    p.n_sample = 2, p.sample = ss;
    p.n_location = 3, p.location = locs;
    p.n_function = 3, p.function = fns;
    p.n_string_table = 7, p.string_table = strings;
    if (tweak != NULL)
        tweak(&p);
    *len = perftools__profiles__profile__get_packed_size(&p);
    uint8_t *buf = malloc(*len);
    perftools__profiles__profile__pack(&p, buf);
    return buf;
}

static uint8_t *gzip_buf(const uint8_t *in, size_t len, size_t *out_len)
{
    z_stream zs = {0};
    cr_assert_eq(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    uint8_t *out = malloc(cap);
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = cap - zs.avail_out;
    deflateEnd(&zs);
    return out;
}

Test(tool_reader, decodes_and_totals)
{
    size_t len, glen;
    uint8_t *raw = build(&len, NULL);
    uint8_t *gz = gzip_buf(raw, len, &glen);
    const uint8_t *inputs[] = {raw, gz};
    size_t lens[] = {len, glen};
    for (int k = 0; k < 2; k++) {
        mpt_profile *p;
        char err[256];
        cr_assert_eq(mpt_profile_parse(inputs[k], lens[k], NULL, &p, err, sizeof err), 0, "%s",
                     err);
        cr_expect_eq(p->ntypes, 2);
        cr_expect_str_eq(p->type_name[1], "inuse_space");
        cr_expect_eq(p->default_type, 1);
        cr_expect_eq(p->nsamples, 2);
        cr_expect_eq(mpt_profile_total(p, 1), 1024);
        cr_expect_eq(mpt_profile_pick_type(p, "count", err, sizeof err), 0);
        cr_expect_eq(mpt_profile_pick_type(p, "nope", err, sizeof err), -1);
        cr_expect(strstr(err, "have: count, inuse_space") != NULL, "%s", err);
        mpt_func_totals ft;
        cr_assert_eq(mpt_func_totals_compute(p, 1, &ft), 0);
        for (size_t i = 0; i < p->nnames; i++) {
            const char *n = p->names[i];
            if (strcmp(n, "leaf") == 0)
                cr_expect(ft.flat[i] == 1000 && ft.cum[i] == 1000);
            else if (strcmp(n, "mid") == 0)
                cr_expect(ft.flat[i] == 24 && ft.cum[i] == 1024, "recursion counted once");
            else if (strcmp(n, "main") == 0)
                cr_expect(ft.flat[i] == 0 && ft.cum[i] == 1024);
            else
                cr_expect(false, "unexpected name %s", n);
        }
        mpt_func_totals_free(&ft);
        /* the views run on it */
        FILE *devnull = fopen("/dev/null", "w");
        mpt_flame_opts fo;
        mpt_flame_opts_init(&fo);
        cr_expect_eq(mpt_top_print(devnull, p, 1, 0, false, true), 0);
        cr_expect_eq(mpt_flame_write(devnull, p, 1, &fo), 0);
        cr_expect_eq(mpt_diff_print(devnull, p, p, NULL, 0, true, err, sizeof err), 0);
        fclose(devnull);
        mpt_profile_free(p);
    }
    free(raw);
    free(gz);
}

static void bad_string(PB *p) { p->function[1]->name = 99; }
static void bad_location(PB *p) { p->sample[1]->location_id[0] = 12345; }
static void bad_function(PB *p) { p->location[0]->line[0]->function_id = 77; }
static void dup_location(PB *p) { p->location[1]->id = p->location[0]->id; }
static void bad_values(PB *p) { p->sample[0]->n_value = 1; }
static void bad_default(PB *p) { p->default_sample_type = -5; }

Test(tool_reader, refuses_broken_references)
{
    struct {
        void (*tweak)(PB *);
        const char *msg;
    } cases[] = {
        {bad_string, "refers to string 99"},
        {bad_location, "missing location 12345"},
        {bad_function, "missing function 77"},
        {dup_location, "location id 100 appears twice"},
        {bad_values, "1 values for 2 sample types"},
        {bad_default, "default_sample_type refers to string -5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *buf = build(&len, cases[i].tweak);
        mpt_profile *p = NULL;
        char err[256] = "";
        cr_expect_eq(mpt_profile_parse(buf, len, NULL, &p, err, sizeof err), -1, "case %zu", i);
        cr_expect(strstr(err, cases[i].msg) != NULL, "case %zu: '%s'", i, err);
        free(buf);
    }
}

Test(tool_reader, truncations_never_crash)
{
    size_t len, glen;
    uint8_t *raw = build(&len, NULL);
    uint8_t *gz = gzip_buf(raw, len, &glen);
    for (size_t n = 0; n < len; n++) {
        mpt_profile *p = NULL;
        char err[256];
        if (mpt_profile_parse(raw, n, NULL, &p, err, sizeof err) == 0)
            mpt_profile_free(p); /* a prefix can be a smaller valid message */
    }
    for (size_t n = 2; n < glen; n++) { /* 0 bytes: an empty (raw) profile */
        mpt_profile *p = NULL;
        char err[256];
        cr_expect_eq(mpt_profile_parse(gz, n, NULL, &p, err, sizeof err), -1, "gzip prefix %zu", n);
    }
    free(raw);
    free(gz);
}

Test(tool_reader, decompression_is_bounded)
{
    size_t big = (size_t)64 << 20, glen;
    uint8_t *zeros = calloc(1, big);
    uint8_t *gz = gzip_buf(zeros, big, &glen);
    free(zeros);
    cr_expect_lt(glen, 1u << 20, "a compression bomb");
    mpt_limits lim;
    mpt_limits_init(&lim);
    lim.max_inflated = (size_t)1 << 20;
    mpt_profile *p;
    char err[256];
    cr_expect_eq(mpt_profile_parse(gz, glen, &lim, &p, err, sizeof err), -1);
    cr_expect(strstr(err, "exceeds the limit") != NULL, "%s", err);
    free(gz);
}

/* ---- ages (ages.h): --older-than / --younger-than, top --age ---------- */

Test(tool_ages, time_label_units)
{
    const int64_t s = 1000000000;
    cr_expect_eq(mpt_time_label_ns(10, "seconds"), 10 * s);
    cr_expect_eq(mpt_time_label_ns(10, "second"), 10 * s);
    cr_expect_eq(mpt_time_label_ns(10, "s"), 10 * s);
    cr_expect_eq(mpt_time_label_ns(3, "minutes"), 180 * s);
    cr_expect_eq(mpt_time_label_ns(3, "m"), 180 * s);
    cr_expect_eq(mpt_time_label_ns(2, "hours"), 7200 * s);
    cr_expect_eq(mpt_time_label_ns(1, "days"), 86400 * s);
    cr_expect_eq(mpt_time_label_ns(250, "ms"), s / 4);
    cr_expect_eq(mpt_time_label_ns(250, "milliseconds"), s / 4);
    cr_expect_eq(mpt_time_label_ns(7, "nanoseconds"), 7);
    cr_expect_eq(mpt_time_label_ns(7, "bytes"), -1);
    cr_expect_eq(mpt_time_label_ns(7, ""), -1);
    cr_expect_eq(mpt_time_label_ns(7, "mss"), -1, "no plural of an abbreviation");
    cr_expect_eq(mpt_time_label_ns(-1, "seconds"), -1);
    cr_expect_eq(mpt_time_label_ns(INT64_MAX / 2, "days"), -1, "overflow");
}

Test(tool_ages, filters_and_parsing)
{
    mpt_limits lim;
    mpt_limits_init(&lim);
    cr_expect(mpt_age_passes(&lim, -1), "no filter: everything passes");
    cr_expect(mpt_age_passes(&lim, 5));
    int64_t ns;
    cr_assert(mpt_parse_age("10m", &ns));
    cr_expect_eq(ns, 600000000000);
    cr_assert(mpt_parse_age("1.5s", &ns));
    cr_expect_eq(ns, 1500000000);
    cr_expect(!mpt_parse_age("ten minutes", &ns));
    cr_expect(!mpt_parse_age("-1m", &ns));
    lim.older_than_ns = 600000000000;
    cr_expect(mpt_age_passes(&lim, 600000000000), "exactly D old is older than D");
    cr_expect(!mpt_age_passes(&lim, 599999999999));
    cr_expect(!mpt_age_passes(&lim, -1), "a filter drops samples without age");
    lim.younger_than_ns = 3600000000000;
    cr_expect(!mpt_age_passes(&lim, 3600000000000), "younger than D excludes D");
    cr_expect(mpt_age_passes(&lim, 3599999999999));
    lim.older_than_ns = -1;
    cr_expect(mpt_age_passes(&lim, 0));
    cr_expect(!mpt_age_passes(&lim, -1));
}

Test(tool_ages, formatting)
{
    char b[32];
    const int64_t s = 1000000000;
    mpt_format_age(b, sizeof b, -1);
    cr_expect_str_eq(b, "-");
    mpt_format_age(b, sizeof b, 0);
    cr_expect_str_eq(b, "0s");
    mpt_format_age(b, sizeof b, 3 * s + 5);
    cr_expect_str_eq(b, "3s");
    mpt_format_age(b, sizeof b, 600 * s);
    cr_expect_str_eq(b, "10m");
    mpt_format_age(b, sizeof b, 90 * s);
    cr_expect_str_eq(b, "1m30s");
    mpt_format_age(b, sizeof b, 5400 * s);
    cr_expect_str_eq(b, "1h30m");
    mpt_format_age(b, sizeof b, 3 * 86400 * s);
    cr_expect_str_eq(b, "3d");
}

/* Sample 0 (leaf<-mid<-main, 1000) is 10 minutes old (label in seconds),
 * sample 1 (mid<-mid<-main, 24) 2 minutes (label in minutes); a comment
 * of mimprof's memory reconciliation and one that is not. */
static void aged(PB *p)
{
    static char *strings[] = {"",
                              "inuse_space",
                              "bytes",
                              "leaf",
                              "mid",
                              "main",
                              "count",
                              "age",
                              "seconds",
                              "minutes",
                              "memory rss: 4096 bytes",
                              "other comment"};
    static Perftools__Profiles__Label l0, l1;
    static Perftools__Profiles__Label *lp0 = &l0, *lp1 = &l1;
    static int64_t comments[] = {10, 11};
    perftools__profiles__label__init(&l0);
    perftools__profiles__label__init(&l1);
    l0.key = 7, l0.num = 600, l0.num_unit = 8;
    l1.key = 7, l1.num = 2, l1.num_unit = 9;
    p->sample[0]->n_label = 1, p->sample[0]->label = &lp0;
    p->sample[1]->n_label = 1, p->sample[1]->label = &lp1;
    p->n_string_table = 12, p->string_table = strings;
    p->n_comment = 2, p->comment = comments;
}

static mpt_profile *parse_aged(int64_t older, int64_t younger)
{
    size_t len;
    uint8_t *raw = build(&len, aged);
    mpt_limits lim;
    mpt_limits_init(&lim);
    lim.older_than_ns = older;
    lim.younger_than_ns = younger;
    mpt_profile *p;
    char err[256];
    cr_assert_eq(mpt_profile_parse(raw, len, &lim, &p, err, sizeof err), 0, "%s", err);
    free(raw);
    return p;
}

Test(tool_ages, reader_reads_ages_and_filters_samples)
{
    const int64_t m = 60000000000;
    mpt_profile *p = parse_aged(-1, -1);
    cr_assert_eq(p->nsamples, 2);
    cr_expect_eq(p->age_ns[0], 10 * m);
    cr_expect_eq(p->age_ns[1], 2 * m, "a label in minutes");
    cr_assert_eq(p->ncomments, 2);
    cr_expect_str_eq(p->comments[0], "memory rss: 4096 bytes");
    mpt_profile_free(p);

    p = parse_aged(5 * m, -1); /* --older-than 5m */
    cr_assert_eq(p->nsamples, 1);
    cr_expect_eq(mpt_profile_total(p, 1), 1000);
    mpt_profile_free(p);
    p = parse_aged(-1, 5 * m); /* --younger-than 5m */
    cr_assert_eq(p->nsamples, 1);
    cr_expect_eq(mpt_profile_total(p, 1), 24);
    mpt_profile_free(p);
    p = parse_aged(2 * m, 10 * m); /* [2m, 10m) */
    cr_expect_eq(mpt_profile_total(p, 1), 24);
    mpt_profile_free(p);
    p = parse_aged(60 * m, -1);
    cr_expect_eq(p->nsamples, 0);
    cr_expect_eq(mpt_profile_total(p, 1), 0);
    mpt_profile_free(p);

    /* An unlabelled profile has no ages; a filter then keeps nothing. */
    size_t len;
    uint8_t *raw = build(&len, NULL);
    mpt_limits lim;
    mpt_limits_init(&lim);
    lim.younger_than_ns = 1000 * m;
    char err[256];
    cr_assert_eq(mpt_profile_parse(raw, len, &lim, &p, err, sizeof err), 0, "%s", err);
    cr_expect_eq(p->nsamples, 0);
    mpt_profile_free(p);
    free(raw);
}

Test(tool_ages, median_age_column_and_memory_head)
{
    const int64_t m = 60000000000;
    mpt_profile *p = parse_aged(-1, -1);
    int64_t *age;
    cr_assert_eq(mpt_func_median_age(p, 1, &age), 0);
    for (size_t i = 0; i < p->nnames; i++) {
        if (strcmp(p->names[i], "leaf") == 0)
            cr_expect_eq(age[i], 10 * m);
        else /* mid and main hold 1000 B of 10m and 24 B of 2m: the median is 10m */
            cr_expect_eq(age[i], 10 * m, "%s", p->names[i]);
    }
    free(age);
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    cr_assert_eq(mpt_top_print(out, p, 1, 0, false, true), 0);
    fclose(out);
    cr_expect(strncmp(text, "memory rss: 4096 bytes\n", 23) == 0, "%s", text);
    cr_expect(strstr(text, "other comment") == NULL, "only the memory lines head the table");
    cr_expect(strstr(text, "    age  function") != NULL, "%s", text);
    cr_expect(strstr(text, "    10m  leaf") != NULL, "%s", text);
    free(text);
    mpt_profile_free(p);
}
