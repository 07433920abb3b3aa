/* SPDX-License-Identifier: MIT */
/* Session rules and pointer lifecycle: missing-allocator rejection, BUSY,
 * INACTIVE for a stopped owner that cannot clear the next session, session
 * restart with stale pointers, realloc failure rollback, moving and
 * in-place realloc, the live-table bound, configuration validation. */
#include "helpers.h"

#include <dlfcn.h>
#include <errno.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

/* p = 1 - exp(-S) is 1 to double precision for S >= 40: with a 1-byte
 * interval every allocation of at least 40 bytes is sampled with weight 1. */
#define ALWAYS 1

/* A size no allocator can serve (the contract suite's IMPOSSIBLE_SIZE). */
#define IMPOSSIBLE_SIZE (SIZE_MAX / 2 - 4096)

static void observe(void) { tmi_dealloc(tmi_alloc(16, 8), 16, 8); }

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

Test(session, start_refuses_until_the_allocator_was_observed, .timeout = 60)
{
    mp_profiler *p = (mp_profiler *)0x1;
    mp_prof_config c = test_config(4096, 1);
    cr_assert_not(stats().allocator_observed);
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_ALLOCATOR_NOT_OBSERVED);
    cr_assert_eq(p, (mp_profiler *)0x1, "*out touched on failure");
    /* a zero-byte allocation does not initialize the thread ... */
    tmi_dealloc(tmi_alloc(0, 8), 0, 8);
    /* ... the first real one does */
    observe();
    cr_assert(stats().allocator_observed);
    p = test_start(&c);
    cr_assert(stats().active);
    mp_profiler_free(p);
    cr_assert_not(stats().active);
}

Test(session, invalid_configurations, .timeout = 60)
{
    observe();
    mp_profiler *p = NULL;
    mp_prof_config c;
    mp_prof_config_init(&c);
    c.sample_interval_bytes = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.sample_interval_bytes = MP_PROF_MAX_INTERVAL + 1;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.max_stack_depth = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.max_stack_depth = 513;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.ring_capacity = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.max_live_samples = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.overflow_stacks = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.report_max_records = 0;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    c.symbolize = (mp_prof_symbolize)7;
    cr_assert_eq(mp_profiler_start(&c, &p), MP_PROF_E_INVALID_CONFIG);
    mp_prof_config_init(&c);
    cr_assert_eq(mp_profiler_start(&c, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_assert_null(p);
    /* NULL config = defaults */
    cr_assert_eq(mp_profiler_start(NULL, &p), MP_PROF_OK);
    mp_profiler_free(p);
}

Test(session, defaults, .timeout = 60)
{
    mp_prof_config c;
    mp_prof_config_init(&c);
    cr_assert_eq(c.sample_interval_bytes, 512u << 10);
    cr_assert_eq(c.max_stack_depth, 64);
    cr_assert_geq(c.max_live_samples, (size_t)1 << 20);
    cr_assert_geq(c.ring_capacity, 1);
    cr_assert_eq(c.seed, 0);
    /* DWARF lines cost ~215M instructions per process at exit;
     * the default is the cheap mode, lines is opt-in. */
    cr_assert_eq(c.symbolize, MP_PROF_SYMBOLIZE_FUNCTIONS);
    cr_assert_str_eq(mp_prof_version(), "0.1.0");
    mp_prof_stats s = stats();
    cr_assert_eq(s.last_symbol_quality, -1);
    cr_assert_eq(s.samples_taken, 0);
}

Test(session, second_start_is_busy, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(4096, 1);
    mp_profiler *p = test_start(&c), *q = NULL;
    cr_assert_eq(mp_profiler_start(&c, &q), MP_PROF_E_BUSY);
    cr_assert_null(q);
    mp_profiler_free(p);
    q = test_start(&c); /* free released the recorder */
    mp_profiler_free(q);
}

void *site_live(size_t n);
__attribute__((noinline)) void *site_live(size_t n)
{
    void *p = tmi_alloc(n, 8);
    TEST_NO_TAIL(p);
    return p;
}

Test(session, stopped_owner_is_inactive_and_cannot_clear_the_next_session, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 1);
    mp_profiler *a = test_start(&c);
    void *x = site_live(100);
    cr_assert_eq(mp_profiler_stop(a), MP_PROF_OK);
    cr_assert_eq(mp_profiler_stop(a), MP_PROF_OK, "stop is idempotent");
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(mp_profiler_report(a, &buf, &len), MP_PROF_E_INACTIVE);
    cr_assert_null(buf);

    mp_profiler *b = test_start(&c);
    void *y = site_live(200);
    void *z = site_live(300);
    mp_prof_stats s = stats();
    cr_assert_eq(s.live_samples, 2);
    /* the stopped owner: every call is refused or a no-op for b */
    cr_assert_eq(mp_profiler_report(a, &buf, &len), MP_PROF_E_INACTIVE);
    cr_assert_eq(mp_profiler_stop(a), MP_PROF_OK);
    mp_profiler_free(a);
    s = stats();
    cr_assert(s.active);
    cr_assert_eq(s.live_samples, 2);
    tp_profile prof;
    test_report(b, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 2);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 500);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), 2);
    tp_free(&prof);
    tmi_dealloc(x, 100, 8);
    tmi_dealloc(y, 200, 8);
    tmi_dealloc(z, 0, 8);
    mp_profiler_free(b);
}

Test(session, restart_with_stale_pointers, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 3);
    mp_profiler *a = test_start(&c);
    void *stale[10];
    for (int i = 0; i < 10; i++)
        stale[i] = site_live(64 + (size_t)i);
    cr_assert_eq(stats().live_samples, 10);
    mp_profiler_free(a);
    cr_assert_eq(stats().live_samples, 0, "stop releases the live table");

    mp_profiler *b = test_start(&c);
    void *fresh[3];
    for (int i = 0; i < 3; i++)
        fresh[i] = site_live(1000);
    /* pointers of session a freed in session b change nothing in b */
    for (int i = 0; i < 5; i++)
        tmi_dealloc(stale[i], 64 + (size_t)i, 8);
    cr_assert_eq(stats().live_samples, 3);
    tp_profile prof;
    test_report(b, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 3);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 3000);
    tp_free(&prof);
    /* a stale pointer realloc'd in b: its old entry is gone, the new block
     * is sampled by the normal rule (always, here) */
    void *moved = tmi_realloc(stale[5], 69, 8, 5000);
    cr_assert_not_null(moved);
    cr_assert_eq(stats().live_samples, 4);
    for (int i = 6; i < 10; i++)
        tmi_dealloc(stale[i], 0, 8);
    for (int i = 0; i < 3; i++)
        tmi_dealloc(fresh[i], 1000, 8);
    tmi_dealloc(moved, 5000, 8);
    cr_assert_eq(stats().live_samples, 0);
    mp_profiler_free(b);
}

Test(session, realloc_failure_rolls_back, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 5);
    mp_profiler *p = test_start(&c);
    unsigned char *x = site_live(64);
    memset(x, 0x5a, 64);
    cr_assert_eq(stats().live_samples, 1);
    errno = 0;
    void *q = tmi_realloc(x, 64, 8, IMPOSSIBLE_SIZE);
    cr_assert_null(q);
    cr_assert_eq(errno, ENOMEM);
    cr_assert_eq(x[63], 0x5a);
    cr_assert_eq(stats().live_samples, 1, "the old entry must stay");
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 1);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 64);
    tp_free(&prof);
    /* and it is still removed by its free */
    tmi_dealloc(x, 64, 8);
    cr_assert_eq(stats().live_samples, 0);
    /* an impossible allocation records nothing either */
    cr_assert_null(tmi_alloc(IMPOSSIBLE_SIZE, 8));
    cr_assert_null(tmi_alloc_zeroed(IMPOSSIBLE_SIZE, 64));
    cr_assert_eq(stats().live_samples, 0);
    mp_profiler_free(p);
}

void *site_realloc(void *p, size_t o, size_t n);
__attribute__((noinline)) void *site_realloc(void *p, size_t o, size_t n)
{
    void *q = tmi_realloc(p, o, 8, n);
    TEST_NO_TAIL(q);
    return q;
}

Test(session, moving_realloc_moves_the_sample, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 6);
    mp_profiler *p = test_start(&c);
    void *x = site_live(64);
    void *y = site_realloc(x, 64, 4 << 20); /* 64 B -> 4 MiB: moves */
    cr_assert_not_null(y);
    cr_assert_neq(x, y);
    cr_assert_eq(stats().live_samples, 1);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_objects", 0), 1);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 4 << 20);
    /* the live sample's stack is the realloc site, not the malloc site */
    int found = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        if (tp_label_str(&prof, &prof.samples[i], "__delta__") != NULL)
            continue;
        Dl_info info;
        uint64_t leaf = tp_leaf_address(&prof, &prof.samples[i]);
        cr_assert(dladdr((void *)(uintptr_t)(leaf - 1), &info) && info.dli_sname != NULL);
        cr_assert_str_eq(info.dli_sname, "site_realloc");
        found++;
    }
    cr_assert_eq(found, 1);
    tp_free(&prof);
    tmi_dealloc(y, 4 << 20, 8);
    cr_assert_eq(stats().live_samples, 0);
    mp_profiler_free(p);
}

Test(session, in_place_realloc_replaces_the_sample, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 6);
    mp_profiler *p = test_start(&c);
    void *x = site_live(1000);
    void *y = site_realloc(x, 1000, 990); /* shrinks in place in mimalloc */
    cr_assert_not_null(y);
    cr_assert_eq(stats().live_samples, 1);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "inuse_space", 0), 990);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), 2, "malloc and realloc are two events");
    tp_free(&prof);
    tmi_dealloc(y, 990, 8);
    mp_profiler_free(p);
}

Test(session, unsampled_realloc_and_free_touch_nothing, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(MP_PROF_MAX_INTERVAL, 6);
    mp_profiler *p = test_start(&c);
    void *x = tmi_alloc(100, 8);
    x = tmi_realloc(x, 100, 8, 200000);
    x = tmi_realloc(x, 200000, 8, 10);
    tmi_dealloc(x, 0, 8);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, 0);
    cr_assert_eq(s.live_samples, 0);
    mp_profiler_free(p);
}

Test(session, zeroed_sampled_blocks_are_zero, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 8);
    mp_profiler *p = test_start(&c);
    for (int i = 0; i < 20; i++) {
        unsigned char *d = tmi_alloc(4096, 64);
        memset(d, 0xff, 4096);
        tmi_dealloc(d, 4096, 64);
        unsigned char *z = tmi_alloc_zeroed(4096, 64);
        cr_assert_eq((uintptr_t)z % 64, 0);
        for (int k = 0; k < 4096; k++)
            cr_assert_eq(z[k], 0);
        tmi_dealloc(z, 4096, 64);
    }
    cr_assert_eq(stats().samples_taken, 40);
    cr_assert_eq(stats().live_samples, 0);
    mp_profiler_free(p);
}

Test(session, live_table_bound_counts_drops, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 9);
    c.max_live_samples = 5;
    mp_profiler *p = test_start(&c);
    void *v[12];
    for (int i = 0; i < 12; i++)
        v[i] = site_live(128);
    mp_prof_stats s = stats();
    cr_assert_eq(s.live_samples, 5);
    cr_assert_eq(s.dropped_live_table_full, 7);
    cr_assert_eq(s.samples_taken, 12);
    for (int i = 0; i < 12; i++)
        tmi_dealloc(v[i], 128, 8);
    cr_assert_eq(stats().live_samples, 0);
    mp_profiler_free(p);
}

Test(session, stop_discards_pending_records_and_accounts_for_them, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 10);
    mp_profiler *p = test_start(&c);
    for (int i = 0; i < 30; i++)
        tmi_dealloc(site_live(64), 64, 8);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, 30);
    cr_assert_eq(s.ring_records + s.overflow_records, 30);
    mp_profiler_stop(p);
    s = stats();
    cr_assert_eq(s.ring_records + s.overflow_records, 0);
    cr_assert_eq(s.records_discarded, 30);
    cr_assert_eq(s.stacks, 0);
    mp_profiler_free(p);
}

Test(session, argument_errors_and_strings, .timeout = 60)
{
    uint8_t *buf;
    size_t len;
    cr_assert_eq(mp_profiler_report(NULL, &buf, &len), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_stop(NULL), MP_PROF_E_INVALID_CONFIG);
    mp_profiler_free(NULL);
    mp_prof_buffer_free(NULL);
    mp_prof_diagnostics(NULL);
    for (int s = MP_PROF_OK; s <= MP_PROF_E_NOT_MANGLED; s++) {
        const char *a = mp_prof_strerror((mp_prof_status)s);
        cr_assert_not_null(a);
        cr_assert_str_not_empty(a);
        for (int t = MP_PROF_OK; t < s; t++)
            cr_assert_str_neq(a, mp_prof_strerror((mp_prof_status)t));
    }
    cr_assert_not_null(mp_prof_strerror((mp_prof_status)99));
}

Test(session, report_interval_semantics, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 11);
    mp_profiler *p = test_start(&c);
    void *keep = site_live(256);
    for (int i = 0; i < 5; i++)
        tmi_dealloc(site_live(64), 64, 8);
    tp_profile a, b;
    test_report(p, &a);
    test_report(p, &b);
    /* the first report has the 6 allocations; the second none, but the
     * live snapshot again */
    cr_assert_eq(test_sum(&a, "alloc_objects", 1), 6);
    cr_assert_eq(test_sum(&b, "alloc_objects", 1), 0);
    cr_assert_eq(test_sum(&a, "inuse_objects", 0), 1);
    cr_assert_eq(test_sum(&b, "inuse_space", 0), 256);
    /* interval samples carry __delta__="false", live samples no label;
     * an interval sample carries no inuse values and vice versa */
    int io = tp_type_index(&a, "inuse_objects"), ao = tp_type_index(&a, "alloc_objects");
    for (size_t i = 0; i < a.nsamples; i++) {
        const char *d = tp_label_str(&a, &a.samples[i], "__delta__");
        if (d != NULL) {
            cr_assert_str_eq(d, "false");
            cr_assert_eq(a.samples[i].values[io], 0);
        } else {
            cr_assert_eq(a.samples[i].values[ao], 0);
        }
    }
    cr_assert_gt(b.time_nanos, 0);
    cr_assert_geq(b.time_nanos, a.time_nanos);
    cr_assert_gt(stats().last_report_nanos, 0);
    tp_free(&a);
    tp_free(&b);
    tmi_dealloc(keep, 256, 8);
    mp_profiler_free(p);
}

/* A thread's last stack is taken without a compare when the walk finds
 * every frame already in the capture buffer: samples alternating between
 * two sites of the same depth, and repeating one, keep their own stacks. */
void *site_left(size_t n);
__attribute__((noinline)) void *site_left(size_t n)
{
    void *q = tmi_alloc(n, 8);
    TEST_NO_TAIL(q);
    return q;
}

void *site_right(size_t n);
__attribute__((noinline)) void *site_right(size_t n)
{
    void *q = tmi_alloc(n, 8);
    TEST_NO_TAIL(q);
    return q;
}

Test(session, alternating_sites_keep_their_stacks, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 8);
    mp_profiler *p = test_start(&c);
    void *x[7];
    const int left[7] = {1, 1, 0, 1, 0, 0, 1}; /* repeats and switches */
    for (int i = 0; i < 7; i++)
        x[i] = left[i] ? site_left(64) : site_right(64);
    tp_profile prof;
    test_report(p, &prof);
    int k = tp_type_index(&prof, "inuse_objects");
    cr_assert_geq(k, 0);
    int64_t nl = 0, nr = 0;
    for (size_t i = 0; i < prof.nsamples; i++) {
        if (tp_label_str(&prof, &prof.samples[i], "__delta__") != NULL)
            continue;
        Dl_info info;
        uint64_t leaf = tp_leaf_address(&prof, &prof.samples[i]);
        cr_assert(dladdr((void *)(uintptr_t)(leaf - 1), &info) && info.dli_sname != NULL);
        nl += strcmp(info.dli_sname, "site_left") == 0 ? prof.samples[i].values[k] : 0;
        nr += strcmp(info.dli_sname, "site_right") == 0 ? prof.samples[i].values[k] : 0;
    }
    tp_free(&prof);
    cr_assert_eq(nl, 4);
    cr_assert_eq(nr, 3);
    for (int i = 0; i < 7; i++)
        tmi_dealloc(x[i], 64, 8);
    mp_profiler_free(p);
}

/* A session started unsymbolized (a process whose host names its
 * reports) names the frames of its next reports once told to. */
Test(session, set_symbolize_names_the_next_reports, .timeout = 60)
{
    observe();
    mp_prof_config c = test_config(ALWAYS, 9);
    mp_profiler *p = test_start(&c);
    void *a0 = site_left(128);
    tp_profile a, b;
    test_report(p, &a);
    int ka = tp_type_index(&a, "inuse_space");
    cr_assert_eq(tp_total_func(&a, ka, "site_left"), 0, "unsymbolized: no names");
    cr_assert_eq(mp_profiler_set_symbolize(p, (mp_prof_symbolize)7), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_set_symbolize(NULL, MP_PROF_SYMBOLIZE_FUNCTIONS),
                 MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_set_symbolize(p, MP_PROF_SYMBOLIZE_FUNCTIONS), MP_PROF_OK);
    test_report(p, &b);
    int kb = tp_type_index(&b, "inuse_space");
    cr_assert_eq(tp_total_func(&b, kb, "site_left"), 128, "named from then on");
    tp_free(&a);
    tp_free(&b);
    tmi_dealloc(a0, 128, 8);
    cr_assert_eq(mp_profiler_stop(p), MP_PROF_OK);
    cr_assert_eq(mp_profiler_set_symbolize(p, MP_PROF_SYMBOLIZE_NONE), MP_PROF_E_INACTIVE);
    mp_profiler_free(p);
}
