/* SPDX-License-Identifier: MIT */
/* Every environment variable the preload runtime reads: its name, default,
 * parser and documentation in one table (rt_env.c), read once from the
 * process's initial environment and never written. Not installed.
 *
 * Why not getenv(): a program may interpose getenv/setenv/unsetenv (bash
 * exports its own, backed by its variable table), and a program may
 * rewrite its environment strings in place (setproctitle). The runtime
 * copies the values it needs out of the envp the dynamic loader passes to
 * constructors, before the program's main, and keeps its own state
 * afterwards; it never calls setenv/unsetenv, so the program and the
 * programs it runs see exactly the environment they were given. */
#ifndef MIMPROF_TOOL_RT_ENV_H
#define MIMPROF_TOOL_RT_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MPT_ENV_INTERVAL,
    MPT_ENV_EVERY,
    MPT_ENV_OUTPUT,
    MPT_ENV_SEED,
    MPT_ENV_STACK_DEPTH,
    MPT_ENV_SYMBOLIZE,
    MPT_ENV_DROP_FRAMES,
    MPT_ENV_KEEP_ALLOC_FRAMES,
    MPT_ENV_DISABLE,
    MPT_ENV_DORMANT,
    MPT_ENV_CTL,
    MPT_ENV_HTTP,
    MPT_ENV_HTTP_WILDCARD,
    MPT_ENV_FOLLOW_FORK,
    MPT_ENV_FOLLOW_EXEC,
    MPT_ENV_ROOT_PID,
    MPT_ENV_QUIET,
    MPT_ENV_IMAGE,
    MPT_ENV_IMAGE_EVERY,
    MPT_ENV_IMAGE_ON_EXIT,
    MPT_ENV_PYROSCOPE_LIB,
    MPT_ENV_PYROSCOPE_SUMMARY,
    MPT_ENV_PYROSCOPE_LOG_LEVEL,
    MPT_ENV_STATUS_DIR,
    MPT_ENV_PYRO_SERVER,
    MPT_ENV_PYRO_APP,
    MPT_ENV_PYRO_UPLOAD_INTERVAL,
    MPT_ENV_REPORT_ABOVE,
    MPT_ENV_COLLECTOR,
    MPT_ENV_COLLECTOR_SYMBOLIZE,
    MPT_ENV_COUNT
} mpt_env_var;

/* How a value is read. */
typedef enum {
    MPT_ENVK_STRING,    /* any text */
    MPT_ENVK_SIZE,      /* 512k, 1m, 64KiB: mpt_parse_size, 1..MP_PROF_MAX_INTERVAL */
    MPT_ENVK_DURATION,  /* 10s, 500ms, 0: mpt_parse_duration_ms */
    MPT_ENVK_U64,       /* a number (decimal, 0x hex, 0 octal) */
    MPT_ENVK_DEPTH,     /* 1..MP_PROF_MAX_STACK_DEPTH */
    MPT_ENVK_FLAG,      /* 0, no, false: off; anything else: on */
    MPT_ENVK_SYMBOLIZE, /* none | functions | lines */
    MPT_ENVK_PID,       /* a process id > 0 */
    MPT_ENVK_THRESHOLD  /* a size or "N%": mpt_parse_threshold (num: the bytes, 0 for N%) */
} mpt_env_kind;

typedef struct {
    const char *name;
    mpt_env_kind kind;
    const char *dflt; /* as documented; NULL: unset */
    const char *doc;  /* one line for the README's table */
} mpt_env_desc;

extern const mpt_env_desc mpt_env_table[MPT_ENV_COUNT];

/* A parsed value: `set` when the variable is present and not empty. */
typedef struct {
    bool set;
    const char *text; /* the copied value (NULL when not set) */
    uint64_t num;     /* SIZE (bytes), DURATION (ms), U64, DEPTH, PID, FLAG (0/1),
                         SYMBOLIZE (an mp_prof_symbolize) */
} mpt_env_value;

/* Copies the values of the table's variables out of envp (NULL: the
 * `environ` of this moment) and parses them. Call once, from a
 * constructor, before the program runs. No allocation. Returns the first
 * variable whose value is malformed or longer than the runtime keeps
 * (MPT_ENV_COUNT when all are fine); *why then says what was expected. */
mpt_env_var mpt_env_load(char *const *envp, const char **why);

/* The value read by mpt_env_load() (unset before it). */
const mpt_env_value *mpt_env(mpt_env_var v);

/* mpt_env(v)->set ? num != 0 : dflt (FLAG variables). */
bool mpt_env_flag(mpt_env_var v, bool dflt);

#endif
