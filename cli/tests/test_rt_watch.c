/* SPDX-License-Identifier: MIT */
/* The memory watch's cgroup limit (rt_watch.h) on a made-up cgroup2 tree:
 * the smallest memory.high / memory.max on the way from the process's
 * cgroup to the root names the memory.current that is watched. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/rt_watch.h"

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

Test(tool_watch, the_smallest_limit_on_the_way_up_wins)
{
    tree();
    put("/memory.max", "500\n"); /* the root is on the way too (a real root has none) */
    put("/a/memory.max", "1000\n");
    put("/a/memory.high", "max\n");
    put("/a/b/memory.max", "2000\n");
    put("/a/b/memory.high", "1500\n");
    uint64_t limit = 0;
    char usage[512], want[512];
    cr_assert_eq(mpt_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), 0);
    cr_expect_eq(limit, 500);
    snprintf(want, sizeof want, "%s/memory.current", root);
    cr_expect_str_eq(usage, want);
    put("/memory.max", "max\n");
    cr_assert_eq(mpt_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), 0);
    cr_expect_eq(limit, 1000);
    snprintf(want, sizeof want, "%s/a/memory.current", root);
    cr_expect_str_eq(usage, want);
    rm_tree();
}

Test(tool_watch, no_limit_anywhere)
{
    tree();
    put("/a/memory.max", "max\n");
    put("/a/b/memory.high", "max\n");
    uint64_t limit = 0;
    char usage[512];
    cr_expect_eq(mpt_watch_cgroup_limit(root, "/a/b", &limit, usage, sizeof usage), -1);
    cr_expect_eq(mpt_watch_cgroup_limit(root, "/", &limit, usage, sizeof usage), -1);
    rm_tree();
}
