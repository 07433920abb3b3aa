/* SPDX-License-Identifier: MIT */
/* Where the runtime's reports go and how they are written, for every mode
 * (bare preload, `mimprof run`, uploads with files). Not installed.
 *
 * Naming. MIMPROF_OUTPUT is a directory (an existing one, or any value
 * ending in '/': created with its missing parents) or a file name pattern
 * in which %p is the pid, %n the report's number in the process, %t the
 * Unix time and %% a percent sign. Relative values are taken from the
 * working directory at start. A directory receives the mode's name in it
 * (`dir_name`, itself a pattern). Names ending in ".gz" are gzip-compressed.
 *
 * Writing. A report is written to a temporary file next to its target,
 * named after the target and the writing process's pid (so concurrent
 * processes never share one), and renamed over the target: a reader never
 * sees a partial file, and a failed write (a full disk) leaves the
 * previous file whole and no temporary behind.
 *
 * What a name may replace: nothing but a regular file. A target that
 * exists and is anything else (a device, a FIFO, a socket, a directory) is
 * refused with one line and nothing is written. A target that is a
 * symbolic link is followed: its final target must be a regular file or
 * not exist yet (it is written there, the link stays); a link to anything
 * else is refused. Links in the directories leading to the target are
 * followed as any path is. */
#ifndef MIMPROF_TOOL_RT_OUTPUT_H
#define MIMPROF_TOOL_RT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    char pattern[4096]; /* absolute */
    char dir[4096];     /* directory mode: the directory (else "") */
    bool gzip;
    bool per_process; /* every name carries the pid (%p) */
} mpt_out;

/* Sets *o from `value` (NULL or "": `dflt`). `dir_name` is the file name
 * pattern used in a directory ("heap.%p.%n.pb.gz"). A directory is
 * created, and must be writable (a file is created and removed in it). A
 * pattern whose name exists now (no % in it) must name a regular file or
 * a symlink to one. 0, or -1 with a reason in why (one line, no newline). */
int mpt_out_configure(mpt_out *o, const char *value, const char *dflt, const char *dir_name,
                      char *why, size_t whylen);

/* The name of report `seq` of process `pid`. 0, or -1 (too long). */
int mpt_out_name(const mpt_out *o, pid_t pid, unsigned seq, char *dst, size_t cap);

/* Checks that `path` may be written (see the header comment) and puts in
 * `real` the file to replace: `path`, or the regular file its symlink
 * names. 0, or -1 with a reason in why. */
int mpt_out_target(const char *path, char *real, size_t cap, char *why, size_t whylen);

/* Writes buf to `path` (gzip-compressed when `gzip`) by temporary file and
 * rename, as described above. 0, or -1 with a reason in why and errno
 * set (ENOSPC: a full disk). The writer's
 * buffers are mmap()ed: it allocates nothing from the sampled malloc. */
int mpt_out_write(const char *path, const uint8_t *buf, size_t len, bool gzip, char *why,
                  size_t whylen);

#endif
