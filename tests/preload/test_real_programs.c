/* SPDX-License-Identifier: MIT */
/* The override under LD_PRELOAD runs programs nobody here wrote: their
 * output is unchanged, and mimalloc served their allocations (the check
 * library reports a malloc() block inside mimalloc's heap and mimalloc's
 * peak committed memory covering what the program held). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct run {
    int status;
    char out[4096];
    int in_heap, sizes_agree;
    size_t peak_commit;
};

/* Runs `cmd` with /bin/sh, optionally under the override and the check
 * library; captures the first 4 KiB of stdout and the check report. */
static void run(const char *cmd, int preload, struct run *r)
{
    char check[] = "/tmp/mimprof-check-XXXXXX";
    int fd = mkstemp(check);
    cr_assert_geq(fd, 0);
    close(fd);
    char full[8192];
    if (preload)
        snprintf(full, sizeof full, "LD_PRELOAD=%s:%s MIMPROF_CHECK_OUT=%s %s", OVERRIDE_PATH,
                 CHECK_PATH, check, cmd);
    else
        snprintf(full, sizeof full, "%s", cmd);
    FILE *p = popen(full, "r");
    cr_assert_not_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    r->status = pclose(p);
    r->in_heap = r->sizes_agree = -1;
    r->peak_commit = 0;
    FILE *c = fopen(check, "r");
    if (c != NULL) {
        if (fscanf(c, "in_heap=%d sizes_agree=%d peak_commit=%zu", &r->in_heap, &r->sizes_agree,
                   &r->peak_commit) != 3)
            r->in_heap = -2;
        fclose(c);
    }
    unlink(check);
}

static void assert_same_output_served_by_mimalloc(const char *cmd, size_t min_commit)
{
    struct run plain, loaded;
    run(cmd, 0, &plain);
    run(cmd, 1, &loaded);
    cr_assert_eq(plain.status, 0, "plain run of %s failed", cmd);
    cr_assert_eq(loaded.status, 0, "preloaded run of %s: status %d", cmd, loaded.status);
    cr_assert_str_eq(loaded.out, plain.out);
    cr_assert_eq(loaded.in_heap, 1, "malloc() block not in mimalloc's heap");
    cr_assert_eq(loaded.sizes_agree, 1, "malloc_usable_size disagrees with mi_usable_size");
    cr_assert_geq(loaded.peak_commit, min_commit, "mimalloc committed only %zu bytes",
                  loaded.peak_commit);
}

Test(override_real_programs, python3_allocation_heavy_script, .timeout = 120)
{
    /* ~64 MiB of small objects and one 32 MiB buffer, then a checksum. */
    assert_same_output_served_by_mimalloc(
        "/usr/bin/python3 -c \""
        "import hashlib\n"
        "xs = [str(i) * 8 for i in range(400000)]\n"
        "buf = bytearray(32 << 20)\n"
        "d = {x: len(x) for x in xs}\n"
        "print(len(xs), sum(d.values()), len(buf), "
        "hashlib.sha256(''.join(xs[::997]).encode()).hexdigest())\"",
        48u << 20);
}

Test(override_real_programs, sort_generated_file, .timeout = 120)
{
    char dir[] = "/tmp/mimprof-sort-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "%s/in.txt", dir);
    FILE *f = fopen(path, "w");
    unsigned x = 12345;
    for (int i = 0; i < 400000; i++) { /* ~8 MB of lines */
        x = x * 1103515245u + 12345u;
        fprintf(f, "%08x line %d payload\n", x, i);
    }
    fclose(f);
    /* one buffer for the whole input (no temp files); print a digest of
     * the sorted output and its first lines */
    snprintf(cmd, sizeof cmd,
             "LC_ALL=C sort -S 64M --parallel=1 %s | sha256sum; LC_ALL=C sort %s | head -3", path,
             path);
    assert_same_output_served_by_mimalloc(cmd, 8u << 20);
    unlink(path);
    rmdir(dir);
}
