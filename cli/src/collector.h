/* SPDX-License-Identifier: MIT */
/* The collector of `mimprof run` (docs/ARCHITECTURE.md, "A process tree
 * as one service"; the channel: runtime/rt_collector.h). One process,
 * running as the user who ran `mimprof run`, forked by it before the
 * command (run_collector.c); one thread, one job at a time:
 *
 *   collector.c        the loop: packets in, until the last process of
 *                      the tree has closed the socket
 *   collector_store.c  the report files and their retention rule
 *   collector_symbols.c  names the frames of unsymbolized reports, once
 *                      per binary for the whole tree
 *   collector_pyro.c   uploads: the reports of every process in one
 *                      window merged (collector_merge.c) into one profile
 *
 * Its messages go to `mimprof run` through a pipe while the command runs
 * (which prints them on its stderr), and to DIR/mimprof.log after: the
 * collector never holds the caller's terminal or pipes. */
#ifndef MIMPROF_CLI_COLLECTOR_H
#define MIMPROF_CLI_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Defaults of the retention rule (--keep, --keep-size; cli/README.md). */
#define MPT_KEEP_DEFAULT       10u
#define MPT_KEEP_BYTES_DEFAULT (256ull << 20)

typedef struct {
    const char *dir;     /* absolute: where the reports go (NULL: none, uploads only) */
    unsigned keep;       /* reports kept per process (0: every one) */
    uint64_t keep_bytes; /* the reports' total size above which older ones go (0: no cap) */
    bool quiet;
    bool upload;        /* uploads to Pyroscope (the PYROSCOPE_* environment) */
    int symbolize;      /* an mp_prof_symbolize: how reports that came unsymbolized are
                            named (MP_PROF_SYMBOLIZE_NONE: they stay so) */
    uint64_t period_ms; /* the report period: the uploads' windows */
} mpt_coll_opts;

/* ---- collector_store.c -------------------------------------------------- */

/* One written report (with its peak, when it has one). */
typedef struct {
    pid_t pid;
    unsigned seq;
    uint64_t bytes; /* both files */
    bool peak;
} mpt_kept;

/* The reports this collector wrote, oldest first, and the rule they are
 * kept under. Files it did not write (earlier runs, a process that wrote
 * its own) are never touched.
 *
 * The rule, applied after each report: a process keeps its `keep` newest
 * reports; then, while the total is above `keep_bytes`, the oldest
 * report that is not the newest of its process goes. The newest report
 * of every process is never deleted, so the cap may be exceeded by
 * those alone. */
typedef struct {
    const mpt_coll_opts *o;
    mpt_kept *v;
    size_t n, cap;
    uint64_t total;
    unsigned written, removed, failed;
} mpt_store;

void mpt_store_init(mpt_store *s, const mpt_coll_opts *o);
void mpt_store_free(mpt_store *s);

/* Writes report `seq` of `pid` (gzip) and its peak (pk NULL: none), then
 * applies the rule. 0, or -1 with the reason in why. */
int mpt_store_write(mpt_store *s, pid_t pid, unsigned seq, const uint8_t *buf, size_t len,
                    const uint8_t *pk, size_t pklen, char *why, size_t whylen);

/* The retention rule alone (after an entry was added); exposed for tests. */
void mpt_store_retain(mpt_store *s);

/* ---- collector_merge.c ------------------------------------------------- */

/* One input of a merge: a pprof, and whether its in-use values count. */
typedef struct {
    const uint8_t *buf;
    size_t len;
    bool inuse;
} mpt_merge_in;

/* The n inputs as one pprof (malloc()ed into *out), stamped
 * [time_ns, time_ns + duration_ns) (time_ns 0: the inputs' span). 0, or
 * -1 (an input that is not a pprof, sample types that differ, no memory). */
int mpt_pprof_merge(const mpt_merge_in *in, size_t n, int64_t time_ns, int64_t duration_ns,
                    uint8_t **out, size_t *outlen);

/* ---- collector_symbols.c ------------------------------------------------ */

typedef struct mpt_csyms mpt_csyms;

/* A symbolizer cache for reports of any process (`mode`: functions or
 * lines). NULL: no memory. */
mpt_csyms *mpt_csyms_new(int mode);
void mpt_csyms_free(mpt_csyms *c);

/* The report `in` with the frames of every mapping that has none named
 * (malloc()ed into *out). 0, or -1 (not a pprof, no memory). */
int mpt_csyms_apply(mpt_csyms *c, const uint8_t *in, size_t len, uint8_t **out, size_t *outlen);

/* Symbol tables built so far (one per object, more when an object grew). */
unsigned mpt_csyms_built(const mpt_csyms *c);

/* ---- collector_pyro.c --------------------------------------------------- */

typedef struct mpt_cpyro mpt_cpyro;

/* Loads the adapter (MIMPROF_PYROSCOPE_LIB) and starts a sink agent from
 * the PYROSCOPE_* environment `mimprof run` exported; windows of
 * `period_ms` (0: 10 s). NULL with the reason in why. */
mpt_cpyro *mpt_cpyro_start(uint64_t period_ms, char *why, size_t whylen);

/* A process's report (and its peak, pk NULL: none) of [from_ns, to_ns):
 * held until its window is uploaded. */
void mpt_cpyro_add(mpt_cpyro *p, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                   size_t pklen, int64_t from_ns, int64_t to_ns);

/* The wall-clock time (ns) at which the oldest held window is due, or 0. */
int64_t mpt_cpyro_due(const mpt_cpyro *p);

/* Uploads the windows due at `now_ns` (every held one with `all`). */
void mpt_cpyro_flush(mpt_cpyro *p, int64_t now_ns, bool all);

/* Into `line`: the summary of the uploads so far ("" when nothing to
 * say and not `always`). With `stop`, the agent is stopped first (its
 * flush deadline); else waits, at most that deadline, for what is queued
 * to be delivered. */
void mpt_cpyro_summary(mpt_cpyro *p, bool stop, bool always, char *line, size_t cap);

void mpt_cpyro_free(mpt_cpyro *p);

/* ---- collector.c -------------------------------------------------------- */

/* Serves the socket `sock` until every process holding its peer has
 * closed it. `notify` is the pipe to `mimprof run` (its messages), `ctl`
 * the pipe from it: a byte (or its end) once the command's process has
 * ended and `mimprof run` closed its own copy of the peer. Then the
 * socket is drained; at its end of file every process is gone and the
 * collector finishes; else (a daemon holds it) it says what it has done
 * so far, closes `notify` and goes on. Returns the exit status. */
int mpt_collector_main(int sock, int notify, int ctl, const mpt_coll_opts *o);

#endif
