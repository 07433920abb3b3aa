/* SPDX-License-Identifier: MIT */
/* Runner of the TSan stand-in for Criterion (see criterion/criterion.h). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#ifndef MP_HANG_DUMP
#error "build with -DMP_HANG_DUMP=\"/path/to/tests/support/hang_dump.sh\" (./dev does)"
#endif

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS   1024
#define MAX_SUITES  128
#define SKIP_STATUS 77

struct test {
    const char *suite, *name;
    void (*fn)(void);
    struct criterion_test_extra_data extra;
};
struct suite {
    const char *name;
    struct criterion_test_extra_data extra;
};

static struct test tests[MAX_TESTS];
static size_t ntests;
static struct suite suites[MAX_SUITES];
static size_t nsuites;
static int expect_failed; /* in the child: a cr_expect* failed */

void mpcr_register_test(const char *suite, const char *name, void (*fn)(void),
                        struct criterion_test_extra_data extra)
{
    if (ntests == MAX_TESTS)
        abort();
    tests[ntests++] = (struct test){suite, name, fn, extra};
}

void mpcr_register_suite(const char *suite, struct criterion_test_extra_data extra)
{
    if (nsuites == MAX_SUITES)
        abort();
    suites[nsuites++] = (struct suite){suite, extra};
}

void mpcr_fail(const char *file, int line, int fatal, const char *text, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "[----] %s:%d: Assertion Failed: %s: ", file, line, text);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (fatal)
        _exit(1);
    expect_failed = 1;
}

void mpcr_skip(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "[SKIP] ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    _exit(SKIP_STATUS);
}

void mpcr_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "[%s] ", level);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static const struct criterion_test_extra_data *suite_extra(const char *name)
{
    for (size_t i = 0; i < nsuites; i++)
        if (strcmp(suites[i].name, name) == 0)
            return &suites[i].extra;
    return NULL;
}

/* Waits for the test's process; past its timeout, the stacks of every
 * thread of it and its children go to stderr (hang_dump.sh, gdb) before
 * it is ended: a hang names its cause in the log, as in the other trees
 * (tests/support/criterion_hang_watch.c). Not inlined: its 4 KiB
 * buffer in run_one's frame, which every test's stack passes through,
 * made the fast unwinder decline that frame (test_unwind_fast.c). */
__attribute__((noinline)) static int wait_test(pid_t pid, const struct test *t, double timeout,
                                               int *status)
{
    struct timespec start, now, nap = {0, 20 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t r = waitpid(pid, status, timeout > 0 ? WNOHANG : 0);
        if (r != 0)
            return r < 0 ? -1 : 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 <
            timeout) {
            nanosleep(&nap, NULL);
            continue;
        }
        fprintf(stderr, "hang_watch: %s::%s timed out after %.0f s; the stacks of its processes:\n",
                t->suite, t->name, timeout);
        fflush(stderr);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "sh '%s' %ld >&2", MP_HANG_DUMP, (long)pid);
        if (system(cmd) != 0)
            fprintf(stderr, "hang_watch: the dump failed\n");
        kill(pid, SIGKILL);
        return waitpid(pid, status, 0) < 0 ? -1 : 0;
    }
}

/* 0 pass, 1 fail, 2 crash, 3 skip */
static int run_one(const struct test *t)
{
    const struct criterion_test_extra_data *s = suite_extra(t->suite);
    double timeout = t->extra.timeout > 0 ? t->extra.timeout : s && s->timeout > 0 ? s->timeout : 0;
    pid_t pid = fork();
    if (pid == 0) {
        if (s && s->init)
            s->init();
        if (t->extra.init)
            t->extra.init();
        t->fn();
        if (t->extra.fini)
            t->extra.fini();
        if (s && s->fini)
            s->fini();
        fflush(NULL);
        _exit(expect_failed ? 1 : 0);
    }
    int status;
    if (pid < 0 || wait_test(pid, t, timeout, &status) < 0)
        return 2;
    int want_code = t->extra.exit_code, want_signal = t->extra.signal;
    if (WIFSIGNALED(status))
        return WTERMSIG(status) == want_signal && want_signal ? 0 : 2;
    if (want_signal)
        return 1;
    if (WEXITSTATUS(status) == SKIP_STATUS)
        return 3;
    return WEXITSTATUS(status) == want_code ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
    unsigned tested = 0, passing = 0, failing = 0, crashing = 0, skipped = 0;
    for (size_t i = 0; i < ntests; i++) {
        const struct test *t = &tests[i];
        char full[512];
        snprintf(full, sizeof full, "%s::%s", t->suite, t->name);
        if (t->extra.disabled || (filter && strstr(full, filter) == NULL))
            continue;
        int r = run_one(t);
        tested++;
        const char *verdict[] = {"PASS", "FAIL", "CRASH", "SKIP"};
        fprintf(stderr, "[%s] %s\n", verdict[r], full);
        passing += r == 0;
        failing += r == 1;
        crashing += r == 2;
        skipped += r == 3;
    }
    fprintf(stderr, "[====] Synthesis: Tested: %u | Passing: %u | Failing: %u | Crashing: %u\n",
            tested - skipped, passing, failing, crashing);
    return failing + crashing ? 1 : 0;
}
