/* SPDX-License-Identifier: MIT */
/* A program that runs unprofiled under `mimprof run` (executed by a
 * child of the profiled process, without --follow-exec: `pg_ctl start`'s
 * shell and server) leaves a note in the run's private status directory,
 * so that `mimprof run` can say at the end how many there were and how to
 * include them (cli/src/run_unprofiled.c). The note is a symbolic link
 * named unprofiled.<pid>.<n> whose target is the program's path: made by
 * one symlink(2), with no descriptor, no allocation and no thread, which
 * is all an unprofiled process may be given (rt_common.h). A process
 * that cannot write there (it dropped privileges) is not counted. */
#define _GNU_SOURCE
#include "rt_common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

void mpt_rt_note_unprofiled(const char *status_dir)
{
    if (status_dir == NULL || status_dir[0] != '/')
        return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    /* n: programs executed one after the other in this pid (sh, then the
     * server it execs) each leave one. */
    for (unsigned k = 0; k < 64; k++) {
        char note[PATH_MAX];
        if (snprintf(note, sizeof note, "%s/unprofiled.%ld.%u", status_dir, (long)getpid(), k) >=
            (int)sizeof note)
            return;
        if (symlink(exe, note) == 0 || errno != EEXIST)
            return;
    }
}
