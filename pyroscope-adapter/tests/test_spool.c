/* SPDX-License-Identifier: MIT */
/* The spool directory holds only what the agent wrote: it refuses a
 * directory that is not one and a lock file that is a symbolic link,
 * and it never opens (or blocks on) an entry that is not a regular file,
 * whatever its name. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/pyroscope.h>

#include "queue.h"

/* The paths a test makes, freed by its fini (LeakSanitizer checks). */
static char *paths[16];
static size_t npaths;

static char *keep(char *p)
{
    cr_assert_not_null(p);
    cr_assert_lt(npaths, sizeof paths / sizeof *paths);
    return paths[npaths++] = p;
}

static void free_paths(void)
{
    while (npaths > 0)
        free(paths[--npaths]);
}

static char *tmpdir(void)
{
    char *d = keep(strdup("/tmp/mimprof-spooltest-XXXXXX"));
    cr_assert_not_null(mkdtemp(d));
    return d;
}

static char *join(const char *a, const char *b)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", a, b) >= 0);
    return keep(p);
}

static mp_pyro_config *cfg;

static void fini(void)
{
    free_paths();
    mp_pyro_config_free(cfg);
    cfg = NULL;
}

static mp_pyro_status open_spool(const char *dir, mp_pyro_spool **sp, char *err, size_t errlen)
{
    if (!cfg)
        cr_assert_eq(mp_pyro_config_new(&cfg), MP_PYRO_OK);
    *sp = NULL;
    err[0] = '\0';
    return mp_pyro_spool_open(dir, 0, 3300, cfg, sp, err, errlen);
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(s, f);
    fclose(f);
}

static void expect_file(const char *path, const char *s)
{
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s is gone", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_expect_str_eq(buf, s, "%s was changed", path);
}

Test(spool, a_regular_file_is_not_a_spool_directory, .fini = fini)
{
    char *d = tmpdir(), *f = join(d, "not-a-dir");
    write_file(f, "mine");
    mp_pyro_spool *sp;
    char err[256];
    cr_expect_eq(open_spool(f, &sp, err, sizeof err), MP_PYRO_E_IO);
    cr_expect_null(sp);
    cr_expect_not_null(strstr(err, "not a directory"), "%s", err);
    expect_file(f, "mine");
}

Test(spool, a_fifo_is_not_a_spool_directory, .fini = fini)
{
    char *d = tmpdir(), *f = join(d, "fifo");
    cr_assert_eq(mkfifo(f, 0600), 0);
    mp_pyro_spool *sp;
    char err[256];
    cr_expect_eq(open_spool(f, &sp, err, sizeof err), MP_PYRO_E_IO);
    cr_expect_not_null(strstr(err, "not a directory"), "%s", err);
    struct stat sb;
    cr_expect(stat(f, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is untouched");
}

Test(spool, a_symlinked_lock_is_refused_and_its_target_untouched, .fini = fini)
{
    char *d = tmpdir(), *spool = join(d, "spool"), *victim = join(d, "victim");
    cr_assert_eq(mkdir(spool, 0700), 0);
    write_file(victim, "precious");
    char *lock = join(spool, ".lock");
    cr_assert_eq(symlink(victim, lock), 0);
    mp_pyro_spool *sp;
    char err[256];
    cr_expect_eq(open_spool(spool, &sp, err, sizeof err), MP_PYRO_E_IO);
    cr_expect_not_null(strstr(err, ".lock"), "%s", err);
    expect_file(victim, "precious");
    /* a dangling one creates nothing where it points */
    char *nowhere = join(d, "created-by-nobody");
    cr_assert_eq(unlink(lock), 0);
    cr_assert_eq(symlink(nowhere, lock), 0);
    cr_expect_eq(open_spool(spool, &sp, err, sizeof err), MP_PYRO_E_IO);
    cr_expect(access(nowhere, F_OK) != 0, "the lock's link target was created");
}

/* An entry named like a spooled profile that is a FIFO, a symlink or a
 * directory is left alone: opening a FIFO would block the agent's start
 * forever, following a link would read (and later delete) another file. */
Test(spool, entries_that_are_not_regular_files_are_skipped, .fini = fini)
{
    char *d = tmpdir(), *spool = join(d, "spool"), *outside = join(d, "outside");
    cr_assert_eq(mkdir(spool, 0700), 0);
    write_file(outside, "not a profile");
    char *fifo = join(spool, "p-1700000000000000000-1-0.mpspool");
    char *link = join(spool, "p-1700000000000000000-1-1.mpspool");
    char *dir = join(spool, "p-1700000000000000000-1-2.mpspool");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(symlink(outside, link), 0);
    cr_assert_eq(mkdir(dir, 0700), 0);
    alarm(20); /* a blocking open fails the test instead of hanging it */
    mp_pyro_spool *sp;
    char err[256];
    cr_assert_eq(open_spool(spool, &sp, err, sizeof err), MP_PYRO_OK, "%s", err);
    alarm(0);
    uint64_t files = 9, bytes = 9, foreign = 9;
    mp_pyro_spool_counts(sp, &files, &bytes, &foreign);
    cr_expect_eq(files, 0, "only regular files are spooled profiles");
    mp_pyro_spool_close(sp);
    expect_file(outside, "not a profile");
}
