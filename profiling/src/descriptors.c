/* SPDX-License-Identifier: MIT */
/* Descriptors the profiler keeps open in the program's process: moved out
 * of its way (mp_prof_fd_high) and identity-checked before every use
 * (mp_prof_fd_take/check/close), profiling.h.
 *
 * open() and socket() hand out the lowest free number, which is the
 * number a program that just closed one expects back (a daemon that
 * closes everything and reopens 0-2 on /dev/null, a shell redirecting
 * fd 3). A descriptor that outlives the call that made it therefore moves
 * out of the program's numbers (below), close-on-exec, so that the
 * program's numbers and the programs it executes are what they would be
 * without us. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/profiling.h>

/* Where our descriptors go. Linux's RLIMIT_NOFILE bounds descriptor
 * *numbers* (a new one is always below the soft limit), not how many are
 * open, and a descriptor keeps its number when the limit is lowered. So
 * at or above the soft limit a descriptor is out of every number the
 * program can get at its limit, and costs it nothing: there is the place
 * when the hard limit leaves room (the soft limit is raised for the one
 * duplication, then put back): from FD_CEILING - FD_MARGIN (4032) up
 * when the hard limit allows, else from the soft limit. Never higher:
 * the kernel sizes a process's descriptor table by its highest number,
 * and select()-sized programs and poll() arrays are not made to grow; so
 * with a soft limit of 4096 or more they stay at 4032-4095, below it,
 * where a program would have to hold 4032 descriptors at once to meet
 * them. With no room at all (soft = hard below 4096) the top of the
 * program's own range is the best left: mp_prof_fd_room() says so, and
 * the preload runtime then steps aside rather than take numbers the
 * program would get. */
#define FD_CEILING 4096
#define FD_MARGIN  64

/* The number to move to (>= 0), or -1 when staying put is best. *raise:
 * the soft limit the duplication needs (0: the current one will do). */
static int fd_target(const struct rlimit *rl, rlim_t *raise)
{
    rlim_t soft = rl->rlim_cur, hard = rl->rlim_max;
    *raise = 0;
    if (soft >= FD_CEILING)
        return FD_CEILING - FD_MARGIN; /* below the soft limit: no raise */
    if (hard > soft) {                 /* room above the program's numbers */
        rlim_t top = hard < FD_CEILING ? hard : FD_CEILING;
        rlim_t t = top > soft + FD_MARGIN ? top - FD_MARGIN : soft;
        *raise = top;
        return (int)t;
    }
    return soft > FD_MARGIN ? (int)(soft - FD_MARGIN) : -1;
}

bool mp_prof_fd_room(void)
{
    struct rlimit rl;
    rlim_t raise;
    return getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= FD_CEILING ||
           (fd_target(&rl, &raise) >= 0 && raise != 0);
}

/* Calls op(ctx) with the soft limit raised to `raise` (0: unchanged) and
 * put back; -1 (errno EMFILE) when it cannot be raised. prlimit sets and
 * reads back in one call: a limit the program set between our two calls
 * is what the second finds, and it is put back. */
static int with_limit(rlim_t raise, rlim_t hard, int (*op)(void *), void *ctx)
{
    if (raise == 0)
        return op(ctx);
    struct rlimit up = {raise, hard}, seen, found;
    if (prlimit(0, RLIMIT_NOFILE, &up, &seen) != 0) {
        errno = EMFILE;
        return -1;
    }
    int r = op(ctx);
    int e = errno;
    if (prlimit(0, RLIMIT_NOFILE, &seen, &found) == 0 &&
        (found.rlim_cur != up.rlim_cur || found.rlim_max != up.rlim_max))
        (void)prlimit(0, RLIMIT_NOFILE, &found, NULL); /* the program's, set meanwhile */
    errno = e;
    return r;
}

struct dup_op {
    int fd, at;
};

static int dup_at(void *ctx)
{
    struct dup_op *d = ctx;
    return fcntl(d->fd, F_DUPFD_CLOEXEC, d->at);
}

int mp_prof_fd_high(int fd)
{
    if (fd < 0)
        return fd;
    struct rlimit rl;
    rlim_t raise;
    int t = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? fd_target(&rl, &raise) : -1;
    if (t < 0 || fd >= t)
        return fd; /* no room up there, or already there */
    struct dup_op d = {fd, t};
    int high = with_limit(raise, rl.rlim_max, dup_at, &d);
    if (high < 0)
        return fd; /* keep the number we have */
    close(fd);
    return high;
}

struct open_op {
    const char *path;
    int flags;
    mode_t mode;
};

static int open_it(void *ctx)
{
    struct open_op *o = ctx;
    return open(o->path, o->flags | O_CLOEXEC, o->mode);
}

int mp_prof_fd_make(int (*make)(void *ctx), void *ctx)
{
    int fd = make(ctx);
    struct rlimit rl;
    if (fd >= 0 || errno != EMFILE || getrlimit(RLIMIT_NOFILE, &rl) != 0 ||
        rl.rlim_max <= rl.rlim_cur)
        return fd;
    /* Every number below the soft limit is the program's: one above it,
     * for the length of the caller's use. */
    rlim_t raise = rl.rlim_max - rl.rlim_cur > FD_MARGIN ? rl.rlim_cur + FD_MARGIN : rl.rlim_max;
    return with_limit(raise, rl.rlim_max, make, ctx);
}

int mp_prof_fd_open(const char *path, int flags, mode_t mode)
{
    struct open_op o = {path, flags, mode};
    int fd = open_it(&o);
    struct rlimit rl;
    rlim_t raise;
    if (fd < 0 && errno == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
        fd_target(&rl, &raise) >= 0 && raise != 0)
        fd = with_limit(raise, rl.rlim_max, open_it, &o); /* every number below is taken */
    return mp_prof_fd_high(fd);
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
