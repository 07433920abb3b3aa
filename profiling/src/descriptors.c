/* SPDX-License-Identifier: MIT */
/* Descriptors the profiler keeps open in the program's process: moved out
 * of its way (mp_prof_fd_high) and identity-checked before every use
 * (mp_prof_fd_take/check/close), profiling.h.
 *
 * open() and socket() hand out the lowest free number, which is the
 * number a program that just closed one expects back (a daemon that
 * closes everything and reopens 0-2 on /dev/null, a shell redirecting
 * fd 3). A descriptor that outlives the call that made it therefore moves
 * to the top of the range, close-on-exec, so that the program's numbers
 * and the programs it executes are what they would be without us. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/profiling.h>

/* The top of the range we use: RLIMIT_NOFILE less 64 (room for the
 * program's own "top" tricks), at most 4096 - 64 so that select()-sized
 * programs and poll() arrays are not made to grow. */
#define FD_CEILING 4096
#define FD_MARGIN  64

int mp_prof_fd_high(int fd)
{
    if (fd < 0)
        return fd;
    struct rlimit rl;
    rlim_t top = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    if (top > FD_CEILING)
        top = FD_CEILING;
    int high = top > FD_MARGIN ? fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - FD_MARGIN)) : -1;
    if (high < 0)
        return fd; /* no room up there: keep the number we have */
    close(fd);
    return high;
}

bool mp_prof_fd_take(mp_prof_owned_fd *o, int fd)
{
    struct stat st;
    *o = MP_PROF_OWNED_FD_NONE;
    if (fd < 0)
        return false;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return false;
    }
    o->fd = fd;
    o->dev = st.st_dev;
    o->ino = st.st_ino;
    return true;
}

bool mp_prof_fd_check(mp_prof_owned_fd *o)
{
    struct stat st;
    if (o->fd < 0)
        return false;
    if (fstat(o->fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino)
        return true;
    o->fd = -1; /* not ours any more: forgotten, never touched */
    return false;
}

void mp_prof_fd_close(mp_prof_owned_fd *o)
{
    if (mp_prof_fd_check(o))
        close(o->fd);
    o->fd = -1;
}
