/* SPDX-License-Identifier: MIT */
/* The LD_PRELOAD objects on programs that know nothing of mimprof: the
 * bundled preload_target (a known population), fork children, real
 * programs (sort, python3), the environment variables and their errors.
 * Built with PRELOAD_MIMALLOC / PRELOAD_JEMALLOC (paths of the objects)
 * and TARGET (path of preload_target). Not run under sanitizers. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pprof_decode.h"

#define SIGMAS 5.0

/* Runs argv with extra environment entries (NULL-terminated), stdout to
 * `out` (may be NULL), stderr to `err` (may be NULL); returns the exit
 * status, or -signal. */
static int run(char *const argv[], const char *const extra_env[], const char *out, const char *err,
               const char *in)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        for (const char *const *e = extra_env; e && *e; e++)
            putenv((char *)*e);
        if (out && !freopen(out, "w", stdout))
            _exit(126);
        if (err && !freopen(err, "w", stderr))
            _exit(126);
        if (in && !freopen(in, "r", stdin))
            _exit(126);
        alarm(120);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

static char *tmpdir(void)
{
    char *d = strdup("/tmp/mimprof-preload-test-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

static void rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static void load_profile(const char *path, tp_profile *prof)
{
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    cr_assert_not_null(buf, "no report at %s", path);
    cr_assert(tp_decode(buf, len, prof), "%s does not decode as pprof", path);
    free(buf);
}

static long read_pid(const char *path, const char *key)
{
    size_t len;
    char *s = (char *)slurp(path, &len);
    cr_assert_not_null(s);
    s[len] = '\0';
    char *k = strstr(s, key);
    cr_assert_not_null(k, "no %s in %s", key, s);
    long v = strtol(k + strlen(key), NULL, 10);
    free(s);
    return v;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static double sigma_bytes(double n, double size, double interval)
{
    double p = -expm1(-size / interval);
    return sqrt(n * (1 - p) / p) * size;
}

static void population(const char *preload)
{
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", preload);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/", dir);
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const char *env[] = {
        env_pre, env_out, "MIMPROF_INTERVAL=16k", "MIMPROF_SEED=5", "MIMPROF_SYMBOLIZE=none", NULL};
    char *argv[] = {TARGET, "population", NULL};
    cr_assert_eq(run(argv, env, out, NULL, NULL), 0);
    long pid = read_pid(out, "pid=");
    char path[4200];
    snprintf(path, sizeof path, "%s/mimprof.%ld.pb", dir, pid);
    tp_profile prof;
    load_profile(path, &prof);
    const double R = 16384;
    /* 71,500 events of 1000 B (malloc/calloc + realloc, 4 threads), 2,000
     * live blocks of 10,000 B, plus a little of libc's own */
    double alloc = (double)tp_total(&prof, "alloc_space");
    double inuse = (double)tp_total(&prof, "inuse_space");
    double want_alloc = 71500.0 * 1000 + 2000.0 * 10000;
    double tol_alloc =
        SIGMAS * hypot(sigma_bytes(71500, 1000, R), sigma_bytes(2000, 10000, R)) + (1 << 20);
    double want_inuse = 2000.0 * 10000;
    double tol_inuse = SIGMAS * sigma_bytes(2000, 10000, R) + (256 << 10);
    cr_log_info("preload %s: alloc_space %.0f (want %.0f +- %.0f), inuse %.0f (want %.0f +- %.0f)",
                preload, alloc, want_alloc, tol_alloc, inuse, want_inuse, tol_inuse);
    cr_assert(fabs(alloc - want_alloc) <= tol_alloc, "alloc_space %.0f, want %.0f +- %.0f", alloc,
              want_alloc, tol_alloc);
    cr_assert(fabs(inuse - want_inuse) <= tol_inuse, "inuse_space %.0f, want %.0f +- %.0f", inuse,
              want_inuse, tol_inuse);
    cr_assert_eq(prof.period, 16384);
    cr_assert_gt(prof.nmappings, 0);
    tp_free(&prof);
    rmtree(dir);
    free(dir);
}

Test(preload, mimalloc_population_to_file, .timeout = 120) { population(PRELOAD_MIMALLOC); }

#ifdef PRELOAD_JEMALLOC
Test(preload, jemalloc_population_to_file, .timeout = 120) { population(PRELOAD_JEMALLOC); }
#endif

/* Every allocation sampled: the profiler's own allocations (through the
 * very malloc it hooks) must stay unsampled and unrecursive. */
Test(preload, interval_of_one_byte, .timeout = 120)
{
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/p.%%p.pb", dir);
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const char *env[] = {env_pre, env_out, "MIMPROF_INTERVAL=1", "MIMPROF_SYMBOLIZE=functions",
                         NULL};
    char *argv[] = {TARGET, "population", NULL};
    cr_assert_eq(run(argv, env, out, NULL, NULL), 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/p.%ld.pb", dir, read_pid(out, "pid="));
    tp_profile prof;
    load_profile(path, &prof);
    /* each allocation weighs 1: the counts are exact (libc adds a few) */
    double objects = (double)tp_total(&prof, "alloc_objects");
    cr_assert_geq(objects, 71500 + 2000);
    cr_assert_leq(objects, 71500 + 2000 + 200);
    double inuse = (double)tp_total(&prof, "inuse_objects");
    cr_assert_geq(inuse, 2000);
    cr_assert_leq(inuse, 2000 + 50);
    tp_free(&prof);
    rmtree(dir);
    free(dir);
}

Test(preload, fork_children_write_their_own_reports, .timeout = 120)
{
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s", dir); /* existing directory */
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    const char *env[] = {
        env_pre, env_out, "MIMPROF_INTERVAL=16k", "MIMPROF_SEED=8", "MIMPROF_SYMBOLIZE=none", NULL};
    char *argv[] = {TARGET, "fork", NULL};
    cr_assert_eq(run(argv, env, out, NULL, NULL), 0);
    long pid = read_pid(out, "pid="), child = read_pid(out, "child=");
    char path[4200];
    const double R = 16384;
    tp_profile parent, kid;
    snprintf(path, sizeof path, "%s/mimprof.%ld.pb", dir, pid);
    load_profile(path, &parent);
    snprintf(path, sizeof path, "%s/mimprof.%ld.pb", dir, child);
    load_profile(path, &kid);
    double pa = (double)tp_total(&parent, "alloc_space");
    double want = 55000.0 * 1000;
    double tol = SIGMAS * sigma_bytes(55000, 1000, R) + (1 << 20);
    cr_assert(fabs(pa - want) <= tol, "parent alloc_space %.0f, want %.0f +- %.0f", pa, want, tol);
    double ka = (double)tp_total(&kid, "alloc_space");
    want = 22000.0 * 3000 + 500.0 * 8000;
    tol = SIGMAS * hypot(sigma_bytes(22000, 3000, R), sigma_bytes(500, 8000, R)) + (1 << 20);
    cr_assert(fabs(ka - want) <= tol, "child alloc_space %.0f, want %.0f +- %.0f", ka, want, tol);
    double ki = (double)tp_total(&kid, "inuse_space");
    want = 500.0 * 8000;
    tol = SIGMAS * sigma_bytes(500, 8000, R) + (256 << 10);
    cr_assert(fabs(ki - want) <= tol, "child inuse_space %.0f, want %.0f +- %.0f", ki, want, tol);
    cr_assert_lt((double)tp_total(&parent, "inuse_space"), 1 << 20,
                 "the child's blocks are not the parent's");
    tp_free(&parent);
    tp_free(&kid);
    rmtree(dir);
    free(dir);
}

/* Real programs keep their output and exit status under the preload, and
 * their reports decode. */
Test(preload, sort_keeps_its_output, .timeout = 120)
{
    char *dir = tmpdir();
    char input[4200], plain[4200], profiled[4200], env_pre[4200], env_out[4200];
    snprintf(input, sizeof input, "%s/input.txt", dir);
    snprintf(plain, sizeof plain, "%s/plain.txt", dir);
    snprintf(profiled, sizeof profiled, "%s/profiled.txt", dir);
    FILE *f = fopen(input, "w");
    unsigned x = 12345;
    for (int i = 0; i < 200000; i++) {
        x = x * 1103515245u + 12345u;
        fprintf(f, "%08x line %d\n", x, i);
    }
    fclose(f);
    char *argv[] = {"sort", input, NULL};
    cr_assert_eq(run(argv, NULL, plain, NULL, NULL), 0);
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/sort.pb", dir);
    const char *env[] = {env_pre, env_out, "MIMPROF_INTERVAL=64k", NULL};
    cr_assert_eq(run(argv, env, profiled, NULL, NULL), 0);
    size_t a, b;
    uint8_t *pa = slurp(plain, &a), *pb = slurp(profiled, &b);
    cr_assert_eq(a, b);
    cr_assert(memcmp(pa, pb, a) == 0, "sort's output changed under the preload");
    free(pa);
    free(pb);
    char path[4200];
    snprintf(path, sizeof path, "%s/sort.pb", dir);
    tp_profile prof;
    load_profile(path, &prof);
    cr_assert_gt(tp_total(&prof, "alloc_space"), 1 << 20);
    tp_free(&prof);
    rmtree(dir);
    free(dir);
}

Test(preload, python3_runs_and_reports, .timeout = 120)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3");
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    const char *env[] = {env_pre, env_out, "MIMPROF_INTERVAL=32k", NULL};
    char *argv[] = {"/usr/bin/python3", "-c",
                    "import os\nx = [bytes(1000) for _ in range(20000)]\n"
                    "print('ok', len(x), os.getpid())",
                    NULL};
    cr_assert_eq(run(argv, env, out, NULL, NULL), 0);
    size_t n;
    char *s = (char *)slurp(out, &n);
    s[n] = '\0';
    cr_assert(strncmp(s, "ok 20000 ", 9) == 0, "python printed %s", s);
    long pid = strtol(s + 9, NULL, 10);
    free(s);
    char path[4200];
    snprintf(path, sizeof path, "%s/mimprof.%ld.pb", dir, pid);
    tp_profile prof;
    load_profile(path, &prof);
    /* 20 MB of bytes objects (and more of Python's own) */
    cr_assert_gt(tp_total(&prof, "alloc_space"), 15 << 20);
    tp_free(&prof);
    rmtree(dir);
    free(dir);
}

/* A shell pipeline: fork + exec of several programs, each with its own
 * report (the %p pattern). */
Test(preload, shell_pipeline_one_report_per_process, .timeout = 120)
{
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/r.%%p.pb", dir);
    snprintf(out, sizeof out, "%s/../mimprof-pipe-%d.txt", dir, (int)getpid());
    const char *env[] = {env_pre, env_out, "MIMPROF_INTERVAL=4k", NULL};
    char *argv[] = {"/bin/sh", "-c", "seq 1 20000 | sort -rn | tail -n 3", NULL};
    cr_assert_eq(run(argv, env, out, NULL, NULL), 0);
    size_t n;
    char *s = (char *)slurp(out, &n);
    s[n] = '\0';
    cr_assert_str_eq(s, "3\n2\n1\n");
    free(s);
    unlink(out);
    cr_assert_geq(count_files(dir), 3, "one report per process of the pipeline");
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        tp_profile prof;
        load_profile(path, &prof);
        tp_free(&prof);
    }
    closedir(d);
    rmtree(dir);
    free(dir);
}

Test(preload, bad_environment_disables_profiling_only, .timeout = 60)
{
    char *dir = tmpdir();
    char env_pre[4200], env_out[4200], out[4200], err[4200];
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", PRELOAD_MIMALLOC);
    snprintf(env_out, sizeof env_out, "MIMPROF_OUTPUT=%s/", dir);
    snprintf(out, sizeof out, "%s/../mimprof-bad-%d.out", dir, (int)getpid());
    snprintf(err, sizeof err, "%s/../mimprof-bad-%d.err", dir, (int)getpid());
    static const char *bad[] = {"MIMPROF_INTERVAL=abc",  "MIMPROF_INTERVAL=0",
                                "MIMPROF_INTERVAL=12q",  "MIMPROF_STACK_DEPTH=0",
                                "MIMPROF_SYMBOLIZE=all", "MIMPROF_SEED=x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *env[] = {env_pre, env_out, bad[i], NULL};
        char *argv[] = {TARGET, "population", NULL};
        cr_assert_eq(run(argv, env, out, err, NULL), 0, "%s", bad[i]);
        size_t n;
        char *s = (char *)slurp(err, &n);
        s[n] = '\0';
        cr_assert(strstr(s, "mimprof:") != NULL && strstr(s, "disabled") != NULL,
                  "%s: stderr was '%s'", bad[i], s);
        free(s);
        cr_assert_eq(count_files(dir), 0, "%s: a report was written", bad[i]);
    }
    const char *env[] = {env_pre, env_out, "MIMPROF_DISABLE=1", NULL};
    char *argv[] = {TARGET, "population", NULL};
    cr_assert_eq(run(argv, env, out, err, NULL), 0);
    cr_assert_eq(count_files(dir), 0);
    /* and the accepted spellings */
    static const char *good[] = {"MIMPROF_INTERVAL=64KiB", "MIMPROF_INTERVAL=1m",
                                 "MIMPROF_INTERVAL=100000", "MIMPROF_INTERVAL=1G"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        const char *env2[] = {env_pre, env_out, good[i], NULL};
        cr_assert_eq(run(argv, env2, out, err, NULL), 0);
        cr_assert_eq(count_files(dir), (int)i + 1, "%s: no report", good[i]);
    }
    unlink(out);
    unlink(err);
    rmtree(dir);
    free(dir);
}
