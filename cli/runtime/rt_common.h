/* SPDX-License-Identifier: MIT */
/* What the pieces of the preload runtime (rt_report.c: reports;
 * image_runtime.c: heap images) both need: messages on stderr, the wait
 * of a periodic thread, and the numbering of the files they write. No
 * allocation beyond opendir()'s. Not installed. */
#ifndef MIMPROF_TOOL_RT_COMMON_H
#define MIMPROF_TOOL_RT_COMMON_H

#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* The runtime's messages go to a descriptor of its own: a close-on-exec
 * duplicate of stderr taken at start, moved to the top of the descriptor
 * range (mp_prof_fd_high), so a program that closes or reuses its stderr
 * neither loses them nor gets them written into the file that took
 * number 2. Before each write the descriptor is checked
 * to still be that file (device and inode): a program that closed every
 * descriptor and reopened that number never receives them either. Called
 * once at start; again in a process that has none yet. Without `hold`
 * (under a collector, which takes the messages: rt_collector.h) no
 * duplicate is made: stderr itself is the fallback, while it is still
 * the file it was at start. */
void mpt_rt_msg_init(bool hold);

/* printf with one write(2) (at most 1023 bytes; no stdio, no malloc),
 * unless `quiet`: into the new file `path` (created 0600, never
 * followed or replaced) when it is not NULL and can be written, else to
 * the collector when there is one, else to the runtime's message
 * descriptor (above). */
void mpt_rt_say_to(bool quiet, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A message on the runtime's message descriptor. */
#define mpt_rt_say(quiet, ...) mpt_rt_say_to((quiet), NULL, __VA_ARGS__)

/* From now on, the socketpairs libcurl makes for itself are moved to the
 * top of the range, close-on-exec (rt_fds.c). Called before the adapter,
 * and with it libcurl, is loaded. */
void mpt_rt_fds_take_libcurl(void);

/* Whether the runtime's descriptors can be kept out of every number the
 * program can get at its descriptor limit (mp_prof_fd_room). When they
 * cannot (`ulimit -n 64`: soft = hard, no room above), one line on stderr
 * says that this process is not profiled, unless `quiet` (rt_fds.c).
 * Before the runtime opens any descriptor. */
bool mpt_rt_fds_room(bool quiet);

/* In a process that runs unprofiled although `mimprof run` runs it (a
 * program a child executed, without --follow-exec): a note in the run's
 * status directory, which `mimprof run` counts at the end
 * (rt_unprofiled.c). No descriptor is opened. */
void mpt_rt_note_unprofiled(const char *status_dir);

/* Adds `ms` milliseconds to *t (normalised). */
void mpt_rt_timespec_add_ms(struct timespec *t, uint64_t ms);

/* Waits for a post of `s` until the CLOCK_REALTIME `deadline`, or with no
 * deadline when it is NULL; EINTR is waited through. 0: posted; -1: the
 * deadline passed (or the wait failed; errno). */
int mpt_rt_wait(sem_t *s, const struct timespec *deadline);

/* The first number n not used by a file "heap.<pid>.<n><suffix>" in `dir`
 * (an exec'd program keeps its pid, and its files continue the series);
 * 0 when the directory cannot be read. */
unsigned mpt_rt_first_free_seq(const char *dir, pid_t pid, const char *suffix);

#endif
