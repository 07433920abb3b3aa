/* SPDX-License-Identifier: MIT */
/* The runtime's environment table (tool/runtime/rt_env.c): every value
 * is parsed as documented, malformed ones are named, nothing is read
 * through getenv (a program's own environment copy cannot change what
 * the runtime sees), and the README's table is the table. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "runtime/rt_env.h"

Test(rt_env, parses_every_kind)
{
    char *envp[] = {"MIMPROF_INTERVAL=64KiB",
                    "MIMPROF_EVERY=500ms",
                    "MIMPROF_STACK_DEPTH=512",
                    "MIMPROF_SYMBOLIZE=none",
                    "MIMPROF_FOLLOW_EXEC=no",
                    "MIMPROF_ROOT_PID=42",
                    "MIMPROF_SEED=0x10",
                    "MIMPROF_OUTPUT=",
                    "UNRELATED=1",
                    NULL};
    const char *why = NULL;
    cr_assert_eq(mpt_env_load(envp, &why), MPT_ENV_COUNT);
    cr_expect_eq(mpt_env(MPT_ENV_INTERVAL)->num, 65536);
    cr_expect_eq(mpt_env(MPT_ENV_EVERY)->num, 500);
    cr_expect_eq(mpt_env(MPT_ENV_STACK_DEPTH)->num, MP_PROF_MAX_STACK_DEPTH);
    cr_expect_eq(mpt_env(MPT_ENV_SYMBOLIZE)->num, MP_PROF_SYMBOLIZE_NONE);
    cr_expect(!mpt_env_flag(MPT_ENV_FOLLOW_EXEC, true));
    cr_expect(mpt_env_flag(MPT_ENV_FOLLOW_FORK, true), "unset: the default");
    cr_expect_eq(mpt_env(MPT_ENV_ROOT_PID)->num, 42);
    cr_expect_eq(mpt_env(MPT_ENV_SEED)->num, 16);
    cr_expect(!mpt_env(MPT_ENV_OUTPUT)->set, "empty is unset");
}

Test(rt_env, names_the_malformed_value)
{
    struct {
        const char *var;
        mpt_env_var which;
    } bad[] = {{"MIMPROF_INTERVAL=0", MPT_ENV_INTERVAL},
               {"MIMPROF_INTERVAL=2T", MPT_ENV_INTERVAL},
               {"MIMPROF_STACK_DEPTH=513", MPT_ENV_STACK_DEPTH},
               {"MIMPROF_STACK_DEPTH=0", MPT_ENV_STACK_DEPTH},
               {"MIMPROF_SYMBOLIZE=all", MPT_ENV_SYMBOLIZE},
               {"MIMPROF_EVERY=soon", MPT_ENV_EVERY},
               {"MIMPROF_ROOT_PID=-3", MPT_ENV_ROOT_PID},
               {"MIMPROF_SEED=x", MPT_ENV_SEED}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *envp[] = {(char *)bad[i].var, NULL};
        const char *why = NULL;
        cr_expect_eq(mpt_env_load(envp, &why), bad[i].which, "%s", bad[i].var);
        cr_expect(why != NULL && why[0] != '\0');
    }
}

Test(rt_env, reads_the_given_environment_not_getenv)
{
    setenv("MIMPROF_INTERVAL", "1k", 1);
    char *envp[] = {"MIMPROF_INTERVAL=2k", NULL};
    const char *why;
    cr_assert_eq(mpt_env_load(envp, &why), MPT_ENV_COUNT);
    cr_expect_eq(mpt_env(MPT_ENV_INTERVAL)->num, 2048);
    /* The values are copies: a program that rewrites its environment
     * strings in place (setproctitle) does not change them. */
    char buf[] = "MIMPROF_OUTPUT=/tmp/a";
    char *envp2[] = {buf, NULL};
    cr_assert_eq(mpt_env_load(envp2, &why), MPT_ENV_COUNT);
    memset(buf, 'x', sizeof buf - 1);
    cr_expect_str_eq(mpt_env(MPT_ENV_OUTPUT)->text, "/tmp/a");
}

/* The README's table lists every variable of the table, with its default
 * and its text, in the table's order; and nothing else. */
Test(rt_env, readme_table_is_the_table)
{
    const char *path = getenv("MIMPROF_TOOL_README");
    cr_assert(path != NULL, "MIMPROF_TOOL_README is not set");
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot open %s", path);
    char line[2048];
    int next = 0, in_table = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "| variable | default | meaning |") == 0) {
            in_table = 1;
            continue;
        }
        if (!in_table || strcmp(line, "|---|---|---|") == 0)
            continue;
        if (line[0] != '|')
            break;
        cr_assert_lt(next, MPT_ENV_COUNT, "README row not in the table: %s", line);
        const mpt_env_desc *d = &mpt_env_table[next++];
        char want[2048];
        char dflt[128];
        snprintf(dflt, sizeof dflt, d->dflt != NULL ? "`%s`" : "(unset)", d->dflt);
        snprintf(want, sizeof want, "| `%s` | %s | %s |", d->name, dflt, d->doc);
        cr_expect_str_eq(line, want);
    }
    fclose(f);
    cr_expect_eq(next, MPT_ENV_COUNT, "the README lists %d of %d variables", next, MPT_ENV_COUNT);
}
