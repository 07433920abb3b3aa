/* SPDX-License-Identifier: MIT */
/* The collector's retention rule (collector_store.c) on its entries
 * alone: the size cap takes the oldest reports that are not their
 * process's newest, and stays linear in the entries when thousands of
 * processes have one report each (a process per connection: the cap used
 * to look for each entry's later ones, quadratic per report, cubic over a
 * run, and this test did not end). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "collector.h"

static mpt_coll_opts opts(unsigned keep, uint64_t keep_bytes)
{
    /* a directory that does not exist: the rule's unlink()s find nothing */
    return (mpt_coll_opts){
        .dir = "/nonexistent/mimprof-store-test", .keep = keep, .keep_bytes = keep_bytes};
}

/* Appends an entry as mpt_store_write does, then the rule. */
static void add(mpt_store *s, pid_t pid, unsigned seq, uint64_t bytes)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        cr_assert(s->v != NULL);
    }
    s->v[s->n++] = (mpt_kept){.pid = pid, .seq = seq, .bytes = bytes};
    s->total += bytes;
    mpt_store_retain(s);
}

static bool has(const mpt_store *s, pid_t pid, unsigned seq)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].pid == pid && s->v[i].seq == seq)
            return true;
    return false;
}

Test(store, cap_takes_the_oldest_that_are_not_newest)
{
    mpt_coll_opts o = opts(0, 1000);
    mpt_store s;
    mpt_store_init(&s, &o);
    for (unsigned seq = 0; seq < 5; seq++) /* 3 processes, 5 reports of 100 B each */
        for (pid_t pid = 10; pid < 13; pid++)
            add(&s, pid, seq, 100);
    cr_expect_leq(s.total, 1000);
    cr_expect_eq(s.total, 1000, "no more goes than the cap asks");
    for (pid_t pid = 10; pid < 13; pid++)
        cr_expect(has(&s, pid, 4), "pid %d keeps its newest", (int)pid);
    cr_expect(!has(&s, 10, 0) && !has(&s, 11, 0) && !has(&s, 12, 0), "the oldest went first");
    cr_expect_eq(s.removed, 5);
    mpt_store_free(&s);
}

Test(store, newest_reports_alone_may_exceed_the_cap)
{
    mpt_coll_opts o = opts(0, 250);
    mpt_store s;
    mpt_store_init(&s, &o);
    for (pid_t pid = 1; pid <= 5; pid++)
        add(&s, pid, 0, 100);
    cr_expect_eq(s.n, 5);
    cr_expect_eq(s.removed, 0);
    add(&s, 3, 1, 100); /* pid 3's first report is not its newest any more */
    cr_expect(!has(&s, 3, 0) && has(&s, 3, 1));
    cr_expect_eq(s.n, 5);
    mpt_store_free(&s);
}

/* The sanitizer trees check the same code for memory errors, not for
 * speed: under ASan the 30,000 processes' rule (one pass a report, 5.8 s
 * with gcc) outlived the 60 s timeout. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STORE_PROCESSES 6000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STORE_PROCESSES 6000
#endif
#endif
#ifndef STORE_PROCESSES
#define STORE_PROCESSES 30000
#endif

Test(store, a_process_per_connection_stays_linear, .timeout = 60)
{
    /* 30,000 processes of one report each, the cap long exceeded by
     * their newest: every report still applies the rule. */
    mpt_coll_opts o = opts(10, 1 << 20);
    mpt_store s;
    mpt_store_init(&s, &o);
    for (pid_t pid = 1; pid <= STORE_PROCESSES; pid++)
        add(&s, pid, 0, 4096);
    cr_expect_eq(s.n, STORE_PROCESSES);
    cr_expect_eq(s.removed, 0);
    add(&s, 7, 1, 4096);
    cr_expect(!has(&s, 7, 0) && has(&s, 7, 1));
    mpt_store_free(&s);
}

Test(store, an_ended_processes_files_go_oldest_first)
{
    /* a process per connection: 600 processes of one report each, every
     * one ended after its report; the cap holds for the whole directory */
    mpt_coll_opts o = opts(2, 1000);
    mpt_store s;
    mpt_store_init(&s, &o);
    for (pid_t pid = 1; pid <= 600; pid++) {
        add(&s, pid, 0, 100);
        mpt_store_ended(&s, pid);
        cr_assert_leq(s.total, 1000, "after process %d: %llu", (int)pid,
                      (unsigned long long)s.total);
    }
    cr_expect_eq(s.n, 10);
    cr_expect(has(&s, 600, 0) && has(&s, 591, 0) && !has(&s, 590, 0), "the newest stay");
    /* a running process's newest is never deleted, also above the cap */
    add(&s, 700, 0, 5000);
    cr_expect(has(&s, 700, 0));
    cr_expect_eq(s.n, 1, "the ended ones made room");
    mpt_store_ended(&s, 700);
    cr_expect_eq(s.n, 0, "ended, it goes too");
    mpt_store_free(&s);
}
