/* SPDX-License-Identifier: MIT */
/* The collector of `mimprof run` (docs/ARCHITECTURE.md, "A process tree
 * as one service"; the channel: runtime/rt_collector.h). One process,
 * running as the user who ran `mimprof run`, forked by it before the
 * command (run_collector.c); one thread, one job at a time:
 *
 *   collector.c        the loop: connections in, a packet each, until
 *                      the command has ended and nothing it knows is alive
 *   collector_procs.c  the processes that said hello: their pids watched,
 *                      their control sockets hosted
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

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rt_collector.h"

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
    uint8_t token[16];  /* what every packet must carry (rt_collector.h) */
} mpt_coll_opts;

/* ---- collector_store.c -------------------------------------------------- */

/* One written report (with its peak, when it has one): heap.<pid>.<seq>,
 * or with pid 0 the service's window service.<seq>, seq its end in ms
 * (collector_windows.c). */
typedef struct {
    pid_t pid;
    uint64_t seq;
    uint64_t bytes; /* both files */
    bool peak;
    bool ended; /* the newest of a process that has ended: it may go too */
} mpt_kept;

/* The reports this collector wrote, oldest first, and the rule they are
 * kept under. Files it did not write (earlier runs, a process that wrote
 * its own) are never touched.
 *
 * The rule, applied after each report and when a process ends: a
 * process keeps its `keep` newest reports; then, while the total is above
 * `keep_bytes`, the oldest report goes that is not the newest of a
 * running process (an ended process's files all may go, oldest first: a
 * service with a process per connection stays under the cap). A running
 * process's newest report is never deleted, so the cap may be exceeded
 * by those alone. The service's windows go after every process's file
 * that may go, oldest first, the newest never. On a full disk (ENOSPC,
 * EDQUOT) room is made in the same order, whatever the cap, before a
 * newer report is lost. */
typedef struct {
    const mpt_coll_opts *o;
    mpt_kept *v;
    size_t n, cap;
    uint64_t total;
    unsigned written, removed, failed;
    unsigned roomed; /* of the removed: to make room on a full disk */
} mpt_store;

void mpt_store_init(mpt_store *s, const mpt_coll_opts *o);
void mpt_store_free(mpt_store *s);

/* Writes report `seq` of `pid` (gzip) and its peak (pk NULL: none), then
 * applies the rule. 0, or -1 with the reason in why. */
int mpt_store_write(mpt_store *s, pid_t pid, unsigned seq, const uint8_t *buf, size_t len,
                    const uint8_t *pk, size_t pklen, char *why, size_t whylen);

/* Writes the service's window ending at end_ms (the merged reports of
 * the tree, and their peaks: pk NULL for none) as service.<end_ms>.pb.gz,
 * then applies the rule. 0, or -1 with the reason in why. */
int mpt_store_write_window(mpt_store *s, uint64_t end_ms, const uint8_t *buf, size_t len,
                           const uint8_t *pk, size_t pklen, char *why, size_t whylen);

/* The retention rule alone (after an entry was added); exposed for tests. */
void mpt_store_retain(mpt_store *s);

/* Process `pid` has ended: its newest report is under the cap as the
 * others are (the rule applied again). */
void mpt_store_ended(mpt_store *s, pid_t pid);

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

/* ---- collector_windows.c ------------------------------------------------ */

typedef struct mpt_cwin mpt_cwin;

/* Where a window goes: its end (ns), its merged reports, its merged
 * peaks (pk NULL: none). */
typedef void (*mpt_cwin_sink)(void *ctx, int64_t end_ns, const uint8_t *buf, size_t len,
                              const uint8_t *pk, size_t pklen);

/* The service's windows of `period_ms` (0: 10 s), each written to `sink`
 * once due; a tree of one process writes none. NULL: no memory. */
mpt_cwin *mpt_cwin_new(uint64_t period_ms, mpt_cwin_sink sink, void *ctx);

/* A process's report (and its peak, pk NULL: none) ending at to_ns. */
void mpt_cwin_add(mpt_cwin *w, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                  size_t pklen, int64_t to_ns);

/* The wall-clock time (ns) at which the oldest held window is due, or 0. */
int64_t mpt_cwin_due(const mpt_cwin *w);

/* Writes the windows due at `now_ns` (every held one with `all`). */
void mpt_cwin_flush(mpt_cwin *w, int64_t now_ns, bool all);

void mpt_cwin_free(mpt_cwin *w);

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

/* How long the collector's uploads go on after the tree ended, at most:
 * MIMPROF_PYROSCOPE_EXIT_DEADLINE (a duration up to 10 min), default
 * 120 s, the adapter's retry budget. */
#define MPT_EXIT_DEADLINE_MS     120000u
#define MPT_EXIT_DEADLINE_MAX_MS 600000u
uint64_t mpt_cpyro_exit_deadline_ms(void);

/* A process's report (and its peak, pk NULL: none) of [from_ns, to_ns),
 * `final` when it is the process's last (at its exit): held until its
 * window is uploaded. */
void mpt_cpyro_add(mpt_cpyro *p, pid_t pid, const uint8_t *buf, size_t len, const uint8_t *pk,
                   size_t pklen, int64_t from_ns, int64_t to_ns, bool final);

/* The wall-clock time (ns) at which the oldest held window is due, or 0. */
int64_t mpt_cpyro_due(const mpt_cpyro *p);

/* Uploads the windows due at `now_ns` (every held one with `all`). */
void mpt_cpyro_flush(mpt_cpyro *p, int64_t now_ns, bool all);

/* Waits at most `ms` for the agent's queue to be delivered (or given
 * up); returns what is still queued. */
uint64_t mpt_cpyro_settle(mpt_cpyro *p, uint64_t ms);

/* Into `line`: the summary of the uploads so far ("" when nothing to
 * say and not `always`). With `stop`, the agent is stopped first (its
 * flush deadline); else waits, at most that deadline, for what is queued
 * to be delivered. */
void mpt_cpyro_summary(mpt_cpyro *p, bool stop, bool always, char *line, size_t cap);

void mpt_cpyro_free(mpt_cpyro *p);

/* ---- collector_procs.c -------------------------------------------------- */

/* A process that said hello (rt_collector.h, HELLO). */
typedef struct {
    pid_t pid;           /* as the collector sees it (SO_PEERCRED) */
    long self_pid;       /* as it sees itself: its control socket's name */
    int pidfd;           /* readable once it has ended (-1: kill(pid, 0) tells) */
    int ctl;             /* the control socket hosted for it, or -1 */
    mpt_coll_page *page; /* the page shared with it, or NULL */
    int pending[8];      /* accepted control connections it has not taken */
    int npending;
    int64_t pending_since_ms;
} mpt_cproc;

typedef struct {
    mpt_cproc *v;
    size_t n, cap;
    int64_t last_hello_ms;
    /* Called with each process forgotten (ended, or BYE); may be NULL. */
    void (*ended)(void *ctx, pid_t pid);
    void *ended_ctx;
} mpt_cprocs;

/* A HELLO from `pid` (SO_PEERCRED), `self_pid` by its own count, with
 * the page of its hosted control (page_fd, or -1). Watched from now on;
 * a process already gone (a last report read after its end) is said
 * ended (`ended`) at once. */
void mpt_cprocs_hello(mpt_cprocs *t, pid_t pid, long self_pid, int page_fd);

/* A BYE from `pid`: no longer waited for. */
void mpt_cprocs_bye(mpt_cprocs *t, pid_t pid);

/* A FETCH from `pid` on `conn`: the answer, with the connections waiting
 * for it (`req` is the request, echoed with kind FETCH and len = how
 * many). */
void mpt_cprocs_fetch(mpt_cprocs *t, pid_t pid, int conn, const mpt_coll_hdr *req);

/* Into pf (room for cap): two entries per process (its pidfd, its hosted
 * control socket; -1 when it has none). How many. */
size_t mpt_cprocs_pollfds(const mpt_cprocs *t, struct pollfd *pf, size_t cap);

/* After poll() over what mpt_cprocs_pollfds gave: connections accepted
 * and handed over, processes whose pidfd said they ended forgotten. */
void mpt_cprocs_events(mpt_cprocs *t, const struct pollfd *pf, size_t npf);

/* Asks each process whether it is alive (a call each: at the command's
 * end and once a second while idle, for processes without a pidfd);
 * forgets ended ones; drops connections waiting too long. */
void mpt_cprocs_sweep(mpt_cprocs *t);

/* Whether `pid` is a process of the tree (it said HELLO or sent a
 * report, and has not been forgotten). */
bool mpt_cprocs_known(const mpt_cprocs *t, pid_t pid);

/* How many known processes are alive. */
size_t mpt_cprocs_alive(mpt_cprocs *t);

void mpt_cprocs_free(mpt_cprocs *t);

/* ---- collector.c -------------------------------------------------------- */

/* Serves the listening socket `listen_fd` (rt_collector.h) until the
 * command has ended and no process of the tree is alive. `notify` is
 * the pipe to `mimprof run` (its messages), `ctl` the pipe from it: a
 * byte (or its end) once the command's process has ended. Then what is
 * queued is read; when no process it knows is alive the collector says
 * what it has done and ends after a grace (MPT_COLL_GRACE_MS, for
 * children that have not said hello yet); else (a daemon) it says what
 * it has done so far, closes `notify` and goes on. Returns the exit
 * status. */
#define MPT_COLL_GRACE_MS 2000
int mpt_collector_main(int listen_fd, int notify, int ctl, const mpt_coll_opts *o);

#endif
