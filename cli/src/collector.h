/* SPDX-License-Identifier: MIT */
/* The collector of `mimprof run` (docs/ARCHITECTURE.md, "A process tree
 * as one service"; the channel: runtime/rt_collector.h). One process,
 * running as the user who ran `mimprof run`, forked by it before the
 * command (run_collector.c); one thread, one job at a time:
 *
 *   collector.c        the loop: packets in, until the last process of
 *                      the tree has closed the socket
 *   collector_store.c  the report files and their retention rule
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
#define MPT_KEEP_DEFAULT 10u
#define MPT_KEEP_BYTES_DEFAULT (256ull << 20)

typedef struct {
    const char *dir;     /* absolute: where the reports go (NULL: none, uploads only) */
    unsigned keep;       /* reports kept per process (0: every one) */
    uint64_t keep_bytes; /* the reports' total size above which older ones go (0: no cap) */
    bool quiet;
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

/* ---- collector.c -------------------------------------------------------- */

/* Serves the socket `sock` until every process holding its peer has
 * closed it; `notify` (or -1) is the pipe to `mimprof run`, closed once it
 * sends ROOT_EXITED. Returns the process's exit status. */
int mpt_collector_main(int sock, int notify, const mpt_coll_opts *o);

#endif
