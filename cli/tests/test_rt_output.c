/* SPDX-License-Identifier: MIT */
/* The runtime's output module (tool/runtime/rt_output.h) on its own, so
 * that the sanitizer trees (which run no preload) check it too: names,
 * refusals of non-regular targets, symlinks, atomic replacement, gzip. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/rt_output.h"

static char g_dir[256];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/mimprof-rt-output-XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_expect(system(cmd) == 0);
}

static char *at(const char *name)
{
    static char buf[4][512];
    static int i;
    char *b = buf[i++ % 4];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static int entries(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", g_dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    cr_assert(p != NULL && fscanf(p, "%d", &n) == 1);
    pclose(p);
    return n;
}

TestSuite(rt_output, .init = setup, .fini = teardown);

Test(rt_output, directory_and_pattern_names)
{
    mpt_out o;
    char why[600], name[4096];
    cr_assert_eq(mpt_out_configure(&o, at("a/b/"), "x", "heap.%p.%n.pb.gz", why, sizeof why), 0,
                 "%s", why);
    struct stat st;
    cr_expect(stat(at("a/b"), &st) == 0 && S_ISDIR(st.st_mode), "created with its parents");
    cr_expect(o.gzip && o.per_process);
    cr_assert_eq(mpt_out_name(&o, 42, 3, name, sizeof name), 0);
    cr_expect_str_eq(name, at("a/b/heap.42.3.pb.gz"));
    cr_assert_eq(mpt_out_configure(&o, at("r-%n-%%.pb"), "x", "d", why, sizeof why), 0);
    cr_expect(!o.gzip && !o.per_process);
    cr_assert_eq(mpt_out_name(&o, 42, 7, name, sizeof name), 0);
    cr_expect_str_eq(name, at("r-7-%.pb"));
}

Test(rt_output, refuses_what_is_not_a_regular_file)
{
    mpt_out o;
    char why[600], real[4096];
    cr_assert_eq(mkfifo(at("fifo"), 0600), 0);
    cr_assert_eq(symlink(at("fifo"), at("to-fifo")), 0);
    cr_expect_eq(mpt_out_configure(&o, at("fifo"), "x", "d", why, sizeof why), -1);
    cr_expect(strstr(why, "not a regular file") != NULL, "%s", why);
    cr_expect_eq(mpt_out_target(at("to-fifo"), real, sizeof real, why, sizeof why), -1);
    cr_expect_eq(mpt_out_write(at("fifo"), (const uint8_t *)"x", 1, false, why, sizeof why), -1);
    struct stat st;
    cr_expect(lstat(at("fifo"), &st) == 0 && S_ISFIFO(st.st_mode), "still a FIFO");
    cr_expect(lstat(at("to-fifo"), &st) == 0 && S_ISLNK(st.st_mode), "still a link");
    cr_expect_eq(entries(), 2, "no temporary left");
}

Test(rt_output, symlink_to_a_regular_file_is_followed)
{
    char why[600];
    FILE *f = fopen(at("real"), "w");
    fputs("old", f);
    fclose(f);
    cr_assert_eq(symlink(at("real"), at("link")), 0);
    cr_assert_eq(mpt_out_write(at("link"), (const uint8_t *)"new", 3, false, why, sizeof why), 0,
                 "%s", why);
    char buf[16] = "";
    cr_expect_eq(slurp(at("real"), buf, sizeof buf), 3);
    cr_expect(memcmp(buf, "new", 3) == 0);
    struct stat st;
    cr_expect(lstat(at("link"), &st) == 0 && S_ISLNK(st.st_mode), "the link stays");
    cr_expect_eq(entries(), 2);
}

Test(rt_output, gzip_output_is_gzip)
{
    char why[600];
    uint8_t data[10000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    cr_assert_eq(mpt_out_write(at("r.pb.gz"), data, sizeof data, true, why, sizeof why), 0);
    char buf[4];
    cr_assert_eq(slurp(at("r.pb.gz"), buf, 2), 2);
    cr_expect((uint8_t)buf[0] == 0x1f && (uint8_t)buf[1] == 0x8b);
}
