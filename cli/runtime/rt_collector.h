/* SPDX-License-Identifier: MIT */
/* The collector of `mimprof run` (docs/ARCHITECTURE.md, "A process tree
 * as one service"): what a profiled process sends it, and the sending
 * side, compiled into the preload runtime. The receiving side is
 * cli/src/collector*.c. Not installed.
 *
 * The channel. `mimprof run` binds an AF_UNIX SOCK_SEQPACKET socket to
 * a fresh abstract name and forks the collector with it; the command and
 * every process of its tree find it by that name, with a secret token,
 * in MIMPROF_COLLECTOR=NAME:TOKEN (32 hex digits). A process holds no
 * descriptor of the channel: each packet goes on a connection of its own
 * (socket, connect, one send, close), whatever the process's user id (an
 * abstract name has no file permissions: a worker that setuid()s to
 * nobody still reaches it) and whatever its descriptor limit (the
 * connection lives for the one call: mp_prof_fd_make puts it above the
 * soft limit when the program holds every number below). The program's
 * descriptor numbers are therefore its own at every limit (cli/README.md,
 * "Descriptors").
 *
 * A packet is one mpt_coll_hdr carrying the token, and:
 *  - HELLO: the process is alive (sent at its start and by a forked
 *    child): the collector watches its pid (a pidfd) and ends when the
 *    command has ended and no process it knows is alive (after a grace
 *    for children that have not said hello yet). With a page (a memfd
 *    of MPT_COLL_PAGE bytes, mpt_coll_page) the collector also hosts the
 *    process's control socket (rt_ctlhost.c);
 *  - REPORT: the report's pprof bytes, then its window's peak's, in a
 *    memfd passed with SCM_RIGHTS (no size limit, nothing copied into the
 *    socket); the collector writes heap.<pid>.<seq>.pb.gz (and
 *    .peak.pb.gz) as the invoking user, under its retention rule;
 *  - MESSAGE: the text of one runtime message after the header;
 *  - BYE: a program executed in a process of the tree that is not
 *    profiled (no --follow-exec): the collector stops waiting for it;
 *  - FETCH: the control connections the collector accepted for this
 *    process come back on the same connection, in one packet whose
 *    header's len says how many (SCM_RIGHTS).
 * The collector believes the pid the kernel gives (SO_PEERCRED) for
 * everything: the processes it tracks, its files' names, its uploads, so
 * that a process of the tree (or anyone with the token) cannot write a
 * file in another process's name. The header's pid, the process's own
 * view, only names a hosted control socket of a process in another pid
 * namespace. A MESSAGE's text is passed on with its control characters
 * escaped.
 *
 * `mimprof run` tells the collector on a pipe of its own when the
 * command's process has ended (collector.h): its reports are queued by
 * then.
 *
 * Never blocking the program. Connections are non-blocking: a full
 * backlog (MPT_COLL_BACKLOG connections waiting), a collector gone, no
 * descriptor to be had make the process write that report itself, as
 * without a collector, and count it; the first such report of a process
 * says so on stderr. */
#ifndef MIMPROF_TOOL_RT_COLLECTOR_H
#define MIMPROF_TOOL_RT_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MPT_COLL_MAGIC 0x4d50433275ULL /* "uC2PM" */
/* Pending connections each hold a descriptor of their peer: a backlog
 * larger than what another user's process holds (1,024 descriptors by
 * default) keeps room for the tree while the collector closes a
 * stranger's idle connections (collector.c). The kernel caps it at
 * net.core.somaxconn (4096 since Linux 5.4). */
#define MPT_COLL_BACKLOG   4096
#define MPT_COLL_TEXT_MAX  1024
#define MPT_COLL_TOKEN     16 /* bytes; 32 hex digits in MIMPROF_COLLECTOR */
#define MPT_COLL_FETCH_MAX 8  /* control connections handed over at once */

enum {
    MPT_COLL_REPORT = 1,
    MPT_COLL_MESSAGE = 2,
    MPT_COLL_HELLO = 3,
    MPT_COLL_FETCH = 4,
    MPT_COLL_BYE = 5,
};

/* Flags of a packet. */
enum {
    MPT_COLL_FINAL = 1,  /* REPORT: the process's last report (its exit) */
    MPT_COLL_WRITE = 2,  /* REPORT: written as a file */
    MPT_COLL_UPLOAD = 4, /* REPORT: uploaded to Pyroscope (collector_pyro.c) */
    MPT_COLL_ACK = 8,    /* HELLO: answered once taken (the control socket bound) */
};

typedef struct {
    uint64_t magic;
    uint8_t token[MPT_COLL_TOKEN];
    uint32_t kind;
    uint32_t flags;
    int64_t pid;     /* the process's pid as it sees itself */
    uint64_t seq;    /* REPORT: the file number */
    uint64_t len;    /* REPORT: report bytes at offset 0 of the memfd; MESSAGE: text bytes;
                        FETCH answer: descriptors passed */
    uint64_t pklen;  /* REPORT: the peak's bytes after them (0: none) */
    int64_t from_ns; /* REPORT: the window [from, to) of its alloc_* values (wall clock) */
    int64_t to_ns;
} mpt_coll_hdr;

/* The page a process shares with the collector when the collector hosts
 * its control socket (rt_ctlhost.c): the collector adds one to `seq` and
 * wakes the futex on it when connections wait for the process. */
#define MPT_COLL_PAGE 4096
typedef struct {
    _Atomic uint32_t seq;
} mpt_coll_page;

/* ---- the sending side (the preload runtime) ---------------------------- */

/* Takes the collector's name and token from MIMPROF_COLLECTOR's value.
 * false when `spec` is NULL or malformed (no collector). */
bool mpt_coll_init(const char *spec);

/* Whether reports and messages go to the collector. */
bool mpt_coll_on(void);

/* In a forked child: its own count of fallbacks. No descriptor to
 * inherit or close. */
void mpt_coll_after_fork(void);

/* Says HELLO (the process is alive: the collector waits for it), with
 * `page_fd` (a memfd of MPT_COLL_PAGE bytes, or -1) when the collector
 * is to host the process's control socket. With `wait`, waits (at most a
 * second) for the collector to have taken it: at a process's start, so
 * that its control socket exists before the program runs, as one the
 * process binds itself does. 0, or -1 (errno). */
int mpt_coll_hello(int page_fd, bool wait);

/* Says BYE: this process, although of the tree, does not profile itself
 * (an executed program, without --follow-exec). */
void mpt_coll_bye(void);

/* Takes at most `max` control connections the collector accepted for
 * this process (FETCH) into fds. How many, or -1 (errno). Waits at most
 * a second for the answer. */
int mpt_coll_fetch(int *fds, int max);

/* A connection for one packet, made before the report it will carry is
 * taken: a process that cannot reach the collector (gone, stopped, its
 * queue full) names that report itself (rt_report.c). The descriptor, or
 * -1 with *why. */
int mpt_coll_dial(const char **why);

/* Hands a report (and its peak, when pk is not NULL) to the collector,
 * to be written (`flags` MPT_COLL_WRITE) and/or uploaded (MPT_COLL_UPLOAD),
 * on `conn` (from mpt_coll_dial, closed here) or, with -1, a connection
 * made here. 0: queued; -1: not (the queue is full, the collector is
 * gone, no memfd): *why says why, and the caller writes the report
 * itself. */
int mpt_coll_send_report(int conn, pid_t pid, unsigned seq, const uint8_t *buf, size_t len,
                         const uint8_t *pk, size_t pklen, int64_t from_ns, int64_t to_ns,
                         unsigned flags, const char **why);

/* Hands a message to the collector: true when queued. */
bool mpt_coll_say(const char *text, size_t len);

/* Reports written by this process itself since it started (not queued). */
unsigned mpt_coll_fallbacks(void);

#endif
