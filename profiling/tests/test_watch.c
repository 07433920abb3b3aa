/* SPDX-License-Identifier: MIT */
/* The memory watch (mp_prof_watch_*, src/watch.c): its cgroup limit on a
 * made-up cgroup2 tree (the smallest memory.high / memory.max on the way
 * from the process's cgroup to the root names the memory.current that is
 * watched), its steps on this process's RSS, and its refusals. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <mimprof/profiling.h>
#include <unistd.h>

#include "watch.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s", root, rel);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static void rm_tree(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0);
}

static void tree(void)
{
    snprintf(root, sizeof root, "/tmp/mimprof-watch-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    char d[512];
    snprintf(d, sizeof d, "%s/a", root);
    mkdir(d, 0700);
    snprintf(d, sizeof d, "%s/a/b", root);
    mkdir(d, 0700);
}

Test(watch, the_smallest_limit_on_the_way_up_wins)
{
    tree();
    put("/memory.max", "500\n"); /* the root is on the way too (a real root has none) */
    put("/a/memory.max", "1000\n");
    put("/a/memory.high", "max\n");
    put("/a/b/memory.max", "2000\n");
    put("/a/b/memory.high", "1500\n");
    uint64_t limit = 0;
    char usage[512], want[512];
    cr_assert_eq(mp_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), 0);
    cr_expect_eq(limit, 500);
    snprintf(want, sizeof want, "%s/memory.current", root);
    cr_expect_str_eq(usage, want);
    put("/memory.max", "max\n");
    cr_assert_eq(mp_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), 0);
    cr_expect_eq(limit, 1000);
    snprintf(want, sizeof want, "%s/a/memory.current", root);
    cr_expect_str_eq(usage, want);
    rm_tree();
}

Test(watch, no_limit_anywhere)
{
    tree();
    put("/a/memory.max", "max\n");
    put("/a/b/memory.high", "max\n");
    uint64_t limit = 0;
    char usage[512];
    cr_expect_eq(mp_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), -1);
    cr_expect_eq(mp_watch_cgroup_limit(root, "/", &limit, usage, sizeof usage), -1);
    rm_tree();
}

/* RSS now, bytes (the second field of /proc/self/statm). */
static uint64_t rss(void)
{
    unsigned long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%lu %lu", &size, &res), 2);
    fclose(f);
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

Test(watch, steps_on_this_process_rss)
{
    uint64_t now = rss();
    mp_prof_watch *w = NULL;
    /* T below the RSS: the first check fires at T, then not again until
     * the next tenth is reached */
    cr_assert_eq(mp_prof_watch_new(now / 2, 0, &w), MP_PROF_OK);
    mp_prof_watch_event ev;
    cr_assert(mp_prof_watch_check(w, &ev));
    cr_expect_eq(ev.threshold, now / 2);
    cr_expect_eq(ev.crossed, now / 2);
    cr_expect(!ev.cgroup);
    cr_expect_geq(ev.memory, now / 2);
    cr_expect_gt(ev.next, ev.memory, "the next step is above the memory seen");
    cr_expect_eq((ev.next - ev.threshold) % (ev.threshold / 10), 0, "a whole number of tenths");
    cr_expect(!mp_prof_watch_check(w, NULL), "one event per step");
    /* memory made resident up to the next step fires again (fresh pages,
     * not the allocator's: a sanitizer's allocator reuses resident ones) */
    size_t need = (size_t)(ev.next - ev.memory) + (1 << 20);
    char *block = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(block, MAP_FAILED);
    memset(block, 1, need);
    cr_expect(mp_prof_watch_check(w, &ev), "RSS %llu, next step %llu", (unsigned long long)rss(),
              (unsigned long long)ev.next);
    munmap(block, need);
    mp_prof_watch_free(w);
    /* T far above: nothing */
    cr_assert_eq(mp_prof_watch_new(now * 64, 0, &w), MP_PROF_OK);
    cr_expect(!mp_prof_watch_check(w, NULL));
    mp_prof_watch_free(w);
}

Test(watch, refusals)
{
    mp_prof_watch *w = (mp_prof_watch *)1;
    cr_expect_eq(mp_prof_watch_new(0, 0, &w), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_watch_new(1 << 20, 50, &w), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_watch_new(0, 101, &w), MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_watch_new(1 << 20, 0, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_expect(!mp_prof_watch_check(NULL, NULL));
    mp_prof_watch_free(NULL);
    /* a percentage: a cgroup limit, or a clear refusal without one */
    mp_prof_status st = mp_prof_watch_new(0, 90, &w);
    cr_expect(st == MP_PROF_OK || st == MP_PROF_E_UNSUPPORTED, "%s", mp_prof_strerror(st));
    if (st == MP_PROF_OK)
        mp_prof_watch_free(w);
}
