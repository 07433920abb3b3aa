/* SPDX-License-Identifier: MIT */
/* The recorder's FIFO (head/length ring: wraparound, partial drains that
 * move only what they consumed) and, end to end, partial report drains
 * with fair budgets between thread rings and overflow shards. */
#include "helpers.h"

#include <dlfcn.h>
#include <pthread.h>

#include <mimprof/sys.h>

#include "ring.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

static mp_record rec(uint64_t i) { return (mp_record){NULL, i, (double)i}; }

Test(fifo, wraparound_keeps_order, .timeout = 60)
{
    mp_record slots[4];
    mp_fifo f = {slots, 4, 0, 0};
    mp_record out[8];
    uint64_t next_in = 0, next_out = 0;
    /* many laps around the 4 slots with varying fill levels */
    for (int lap = 0; lap < 50; lap++) {
        uint32_t add = (uint32_t)(lap % 4) + 1;
        for (uint32_t i = 0; i < add && mp_fifo_space(&f) != 0; i++) {
            mp_record r = rec(next_in++);
            cr_assert(mp_fifo_push(&f, &r));
        }
        uint32_t n = mp_fifo_take(&f, out, (uint32_t)(lap % 3) + 1);
        for (uint32_t i = 0; i < n; i++)
            cr_assert_eq(out[i].size, next_out++, "FIFO order broken at lap %d", lap);
    }
    uint32_t n = mp_fifo_take(&f, out, 8);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(out[i].size, next_out++);
    cr_assert_eq(next_out, next_in);
    cr_assert_eq(f.len, 0);
}

Test(fifo, full_rejects_and_partial_take_moves_nothing_else, .timeout = 60)
{
    mp_record slots[5];
    mp_fifo f = {slots, 5, 0, 0};
    for (uint64_t i = 0; i < 5; i++) {
        mp_record r = rec(i);
        cr_assert(mp_fifo_push(&f, &r));
    }
    mp_record r = rec(99);
    cr_assert_not(mp_fifo_push(&f, &r), "a full FIFO must refuse");
    mp_record out[2];
    cr_assert_eq(mp_fifo_take(&f, out, 2), 2);
    cr_assert_eq(out[0].size, 0);
    cr_assert_eq(out[1].size, 1);
    /* the remaining records did not move: head advanced, slots intact */
    cr_assert_eq(f.head, 2);
    cr_assert_eq(f.len, 3);
    for (uint64_t i = 2; i < 5; i++)
        cr_assert_eq(slots[i].size, i);
    /* the freed slots are reused at the tail (wrapping) */
    mp_record a = rec(5), b = rec(6);
    cr_assert(mp_fifo_push(&f, &a));
    cr_assert(mp_fifo_push(&f, &b));
    cr_assert_eq(slots[0].size, 5);
    cr_assert_eq(slots[1].size, 6);
    mp_record all[5];
    cr_assert_eq(mp_fifo_take(&f, all, 5), 5);
    for (uint64_t i = 0; i < 5; i++)
        cr_assert_eq(all[i].size, i + 2);
    cr_assert_eq(mp_fifo_take(&f, all, 5), 0);
}

/* ------------------------------------------------- partial report drains */

void *rd_first(void);
void *rd_second(void);
__attribute__((noinline)) void *rd_first(void)
{
    void *p = tmi_alloc(64, 8);
    TEST_NO_TAIL(p);
    return p;
}
__attribute__((noinline)) void *rd_second(void)
{
    void *p = tmi_alloc(64, 8);
    TEST_NO_TAIL(p);
    return p;
}

static test_barrier filled, reported;
/* The two threads fill one after the other: a ring registers at its
 * thread's first hit, and two registrations at the same instant may meet
 * on the registry lock, which is a counted drop by design (tested in
 * test_threads.c), not what this test is about. */
static pthread_mutex_t fill_one_at_a_time = PTHREAD_MUTEX_INITIALIZER;

static void *two_phase(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&fill_one_at_a_time);
    for (int i = 0; i < 5; i++)
        tmi_dealloc(rd_first(), 64, 8);
    for (int i = 0; i < 5; i++)
        tmi_dealloc(rd_second(), 64, 8);
    pthread_mutex_unlock(&fill_one_at_a_time);
    test_barrier_wait(&filled);   /* rings stay registered ... */
    test_barrier_wait(&reported); /* ... until the reports are done */
    return NULL;
}

static int64_t site_value(const tp_profile *prof, const char *name, const char *type)
{
    int k = tp_type_index(prof, type);
    int64_t sum = 0;
    for (size_t i = 0; i < prof->nsamples; i++) {
        Dl_info info;
        uint64_t leaf = tp_leaf_address(prof, &prof->samples[i]);
        if (dladdr((void *)(uintptr_t)(leaf - 1), &info) && info.dli_sname != NULL &&
            strcmp(info.dli_sname, name) == 0)
            sum += prof->samples[i].values[k];
    }
    return sum;
}

static int64_t site_objects(const tp_profile *prof, const char *name)
{
    return site_value(prof, name, "alloc_objects");
}

/* Two threads each hold 10 records in their rings (5 from rd_first, then 5
 * from rd_second). A report with a budget of 10 takes 5 from each ring:
 * the oldest, i.e. exactly the rd_first ones; the next report the rest. */
Test(drain, partial_drains_take_the_oldest_fairly, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 21);
    c.ring_capacity = 64;
    c.report_max_records = 10;
    mp_profiler *p = test_start(&c);
    test_barrier_init(&filled, 3);
    test_barrier_init(&reported, 3);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, two_phase, NULL);
    test_barrier_wait(&filled);
    mp_prof_stats s = stats();
    cr_assert_eq(s.ring_records, 20);
    cr_assert_eq(s.registered_threads, 2);

    tp_profile a, b;
    test_report(p, &a);
    s = stats();
    cr_assert_eq(s.samples_reported, 10);
    cr_assert_eq(s.ring_records, 10);
    cr_assert_eq(site_objects(&a, "rd_first"), 10, "the first drain takes the oldest records");
    cr_assert_eq(site_objects(&a, "rd_second"), 0);
    test_report(p, &b);
    cr_assert_eq(site_objects(&b, "rd_first"), 0);
    cr_assert_eq(site_objects(&b, "rd_second"), 10);
    cr_assert_eq(stats().ring_records, 0);
    tp_free(&a);
    tp_free(&b);
    test_barrier_wait(&reported);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    mp_profiler_free(p);
}

/* Distinct stacks for the shard side: recursion depth makes the stack. */
__attribute__((noinline)) static void *nested(int depth)
{
    void *p = depth == 0 ? tmi_alloc(64, 8) : nested(depth - 1);
    TEST_NO_TAIL(p);
    return p;
}

/* Rings and shards both hold a backlog larger than the budget: one report
 * must take from both (neither starves), and successive reports drain
 * everything with nothing lost. */
Test(drain, budget_is_shared_between_rings_and_shards, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 22);
    c.ring_capacity = 8;
    c.report_max_records = 6;
    mp_profiler *p = test_start(&c);
    /* 40 records over 40 distinct stacks: 32 handed to shards, 8 in the ring */
    for (int i = 0; i < 40; i++)
        tmi_dealloc(nested(i), 64, 8);
    mp_prof_stats s0 = stats();
    cr_assert_eq(s0.ring_records, 8);
    cr_assert_eq(s0.overflow_records, 32);
    tp_profile prof;
    test_report(p, &prof);
    tp_free(&prof);
    mp_prof_stats s1 = stats();
    cr_assert_eq(s1.samples_reported, 6);
    cr_assert_lt(s1.ring_records, s0.ring_records, "rings starved");
    cr_assert_lt(s1.overflow_records, s0.overflow_records, "shards starved");
    int64_t total = 6;
    for (int i = 0; i < 20 && stats().ring_records + stats().overflow_records != 0; i++) {
        test_report(p, &prof);
        total += test_sum(&prof, "alloc_objects", 1);
        tp_free(&prof);
    }
    cr_assert_eq(total, 40);
    cr_assert_eq(stats().samples_reported, 40);
    mp_profiler_free(p);
}

/* A burst far larger than any buffer between two reports is not dropped:
 * the shards aggregate per stack. */
Test(drain, bursts_aggregate_in_shards_without_drops, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 23);
    c.ring_capacity = 16;
    c.overflow_stacks = 4;
    mp_profiler *p = test_start(&c);
    const int n = TEST_SANITIZED ? 20000 : 100000;
    for (int i = 0; i < n; i++)
        tmi_dealloc(rd_first(), 64, 8);
    mp_prof_stats s = stats();
    cr_assert_eq(s.dropped_overflow_full, 0);
    cr_assert_eq(s.ring_records + s.overflow_records, (uint64_t)n);
    tp_profile prof;
    test_report(p, &prof);
    cr_assert_eq(test_sum(&prof, "alloc_objects", 1), n);
    tp_free(&prof);
    mp_profiler_free(p);
}

/* When the shards cannot take another stack and the ring is full, the hit
 * is a counted drop. */
Test(drain, full_ring_and_full_shards_count_drops, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 24);
    c.ring_capacity = 2;
    c.overflow_stacks = 1; /* one stack per shard at most */
    mp_profiler *p = test_start(&c);
    for (int i = 0; i < 200; i++)
        tmi_dealloc(nested(i % 100), 64, 8);
    mp_prof_stats s = stats();
    cr_assert_gt(s.dropped_overflow_full, 0);
    cr_assert_eq(s.samples_taken, s.ring_records + s.overflow_records + s.dropped_overflow_full);
    tp_profile prof;
    test_report(p, &prof);
    tp_free(&prof);
    s = stats();
    cr_assert_eq(s.samples_taken, s.samples_reported + s.dropped_overflow_full);
    mp_profiler_free(p);
}

/* A full ring's handoff sums a run of one stack in one go, one contiguous
 * part of the ring at a time: runs that cross the ring's end, runs cut by
 * another stack, and every record's size must all arrive. Sizes of 64
 * bytes and more at a 1-byte interval weigh exactly 1, so the sums are
 * exact. */
void *hs_a(size_t size);
void *hs_b(size_t size);
__attribute__((noinline)) void *hs_a(size_t size)
{
    void *p = tmi_alloc(size, 8);
    TEST_NO_TAIL(p);
    return p;
}
__attribute__((noinline)) void *hs_b(size_t size)
{
    void *p = tmi_alloc(size, 8);
    TEST_NO_TAIL(p);
    return p;
}

Test(drain, handoff_sums_runs_across_the_ring_end, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, 25);
    c.ring_capacity = 8;
    c.report_max_records = 3;
    mp_profiler *p = test_start(&c);
    int64_t want_a = 0, want_b = 0, got_a = 0, got_b = 0, got_n = 0;
    size_t size = 64;
    tp_profile prof;
    /* 8 of A fill the ring; a report takes 3 (head moves to 3) */
    for (int i = 0; i < 8; i++, size++) {
        tmi_dealloc(hs_a(size), size, 8);
        want_a += (int64_t)size;
    }
    test_report(p, &prof);
    got_a += site_value(&prof, "hs_a", "alloc_space");
    got_n += test_sum(&prof, "alloc_objects", 1);
    tp_free(&prof);
    /* 3 more of A wrap around the ring's end: one run of 8 across it */
    for (int i = 0; i < 3; i++, size++) {
        tmi_dealloc(hs_a(size), size, 8);
        want_a += (int64_t)size;
    }
    cr_assert_eq(stats().ring_records, 8);
    /* B, A, B, ... make runs of one; then A again */
    for (int i = 0; i < 21; i++, size++) {
        bool b = i % 2 == 0 && i < 12;
        tmi_dealloc(b ? hs_b(size) : hs_a(size), size, 8);
        *(b ? &want_b : &want_a) += (int64_t)size;
    }
    cr_assert_gt(stats().overflow_records, 0);
    for (int i = 0; i < 40 && stats().ring_records + stats().overflow_records != 0; i++) {
        test_report(p, &prof);
        got_a += site_value(&prof, "hs_a", "alloc_space");
        got_b += site_value(&prof, "hs_b", "alloc_space");
        got_n += test_sum(&prof, "alloc_objects", 1);
        tp_free(&prof);
    }
    mp_prof_stats s = stats();
    cr_assert_eq(s.dropped_overflow_full, 0);
    cr_assert_eq(got_n, 32);
    cr_assert_eq(s.samples_reported, 32);
    cr_assert_eq(got_a, want_a);
    cr_assert_eq(got_b, want_b);
    mp_profiler_free(p);
}
