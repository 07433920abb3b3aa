/* SPDX-License-Identifier: MIT */
/* The collector of `mimprof run` (docs/ARCHITECTURE.md, "A process tree
 * as one service"): what a profiled process sends it, and the sending
 * side, compiled into the preload runtime. The receiving side is
 * cli/src/collector*.c. Not installed.
 *
 * The channel. `mimprof run` makes an AF_UNIX SOCK_SEQPACKET socketpair
 * and forks the collector with one end; the other end is inherited by
 * the command (a descriptor at the top of the range, named with its
 * device and inode in MIMPROF_COLLECTOR=FD:DEV:INO), and so by every
 * process of its tree: one shared socket, whatever the processes' user
 * ids (a worker that setuid()s to nobody keeps it). The collector sees
 * end of file when the last process holding it has closed it (exited),
 * and ends then: it outlives `mimprof run` when the service daemonizes.
 *
 * A packet is one mpt_coll_hdr, and:
 *  - REPORT: the report's pprof bytes, then its window's peak's, in a
 *    memfd passed with SCM_RIGHTS (no size limit, nothing copied into the
 *    socket); the collector writes heap.<pid>.<seq>.pb.gz (and
 *    .peak.pb.gz) as the invoking user, under its retention rule;
 *  - MESSAGE: the text of one runtime message after the header;
 *
 * `mimprof run` tells the collector on a pipe of its own when the
 * command's process has ended (collector.h): its reports are queued by
 * then.
 *
 * Never blocking the program. A process sends with MSG_DONTWAIT: the
 * queue is bounded by the socket's send buffer (set small by `mimprof
 * run`: MPT_COLL_SNDBUF); a full queue, a collector gone, a descriptor
 * the program closed or reused (checked by device and inode before every
 * send) make the process write that report itself, as without a
 * collector, and count it; the first such report of a process says so
 * on stderr. */
#ifndef MIMPROF_TOOL_RT_COLLECTOR_H
#define MIMPROF_TOOL_RT_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MPT_COLL_MAGIC    0x4d50433175ULL /* "uC1PM" */
#define MPT_COLL_SNDBUF   (64 * 1024)
#define MPT_COLL_TEXT_MAX 1024

enum { MPT_COLL_REPORT = 1, MPT_COLL_MESSAGE = 2 };

/* Flags of a REPORT. */
enum {
    MPT_COLL_FINAL = 1,  /* the process's last report (its exit) */
    MPT_COLL_WRITE = 2,  /* written as a file */
    MPT_COLL_UPLOAD = 4, /* uploaded to Pyroscope (collector_pyro.c) */
};

typedef struct {
    uint64_t magic;
    uint32_t kind;
    uint32_t flags;
    int64_t pid;
    uint64_t seq;    /* REPORT: the file number */
    uint64_t len;    /* REPORT: report bytes at offset 0 of the memfd; MESSAGE: text bytes */
    uint64_t pklen;  /* REPORT: the peak's bytes after them (0: none) */
    int64_t from_ns; /* REPORT: the window [from, to) of its alloc_* values (wall clock) */
    int64_t to_ns;
} mpt_coll_hdr;

/* ---- the sending side (the preload runtime) ---------------------------- */

/* Takes the collector's descriptor from MIMPROF_COLLECTOR's value
 * ("FD:DEV:INO"): usable when FD still names that socket. false when
 * `spec` is NULL, malformed, or names nothing of ours. */
bool mpt_coll_init(const char *spec);

/* Whether reports and messages go to the collector. */
bool mpt_coll_on(void);

/* In a process that does not profile itself: closes the inherited
 * descriptor when it is still ours (no descriptor of ours in it). */
void mpt_coll_close_unprofiled(const char *spec);

/* In a forked child: `exec_inherits` false marks the descriptor
 * close-on-exec in this process (the programs it executes are not
 * profiled: they get no descriptor of ours); `profiled` false closes it. */
void mpt_coll_after_fork(bool profiled, bool exec_inherits);

/* Hands a report (and its peak, when pk is not NULL) to the collector,
 * to be written (`flags` MPT_COLL_WRITE) and/or uploaded (MPT_COLL_UPLOAD).
 * 0: queued; -1: not (the queue is full, the collector is gone, no
 * memfd): *why says why, and the caller writes the report itself. */
int mpt_coll_send_report(pid_t pid, unsigned seq, const uint8_t *buf, size_t len, const uint8_t *pk,
                         size_t pklen, int64_t from_ns, int64_t to_ns, unsigned flags,
                         const char **why);

/* Hands a message to the collector: true when queued. */
bool mpt_coll_say(const char *text, size_t len);

/* Reports written by this process itself since it started (not queued). */
unsigned mpt_coll_fallbacks(void);

#endif
