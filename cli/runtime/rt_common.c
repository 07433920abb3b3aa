/* SPDX-License-Identifier: MIT */
/* Shared by the preload runtime's reports and heap images (rt_common.h). */
#define _GNU_SOURCE
#include "rt_common.h"

#include "rt_collector.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/profiling.h>

static mp_prof_owned_fd msg = {.fd = -1};

void mpt_rt_msg_init(bool hold)
{
    if (mp_prof_fd_check(&msg))
        return; /* inherited across fork: still ours */
    if (!hold) {
        /* stderr itself, while it is the file it is now; never closed */
        struct stat st;
        if (fstat(2, &st) == 0)
            msg = (mp_prof_owned_fd){.fd = 2, .dev = st.st_dev, .ino = st.st_ino};
        return;
    }
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0) /* else no stderr: messages have nowhere to go */
        mp_prof_fd_take(&msg, mp_prof_fd_high(fd));
}

void mpt_rt_say_to(bool quiet, const char *path, const char *fmt, ...)
{
    if (quiet)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (path != NULL) {
        int fd = mp_prof_fd_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd >= 0) {
            bool ok = write(fd, buf, len) == (ssize_t)len;
            if (close(fd) == 0 && ok)
                return;
            unlink(path);
        }
    }
    if (mpt_coll_say(buf, len))
        return;
    if (mp_prof_fd_check(&msg)) {
        ssize_t w = write(msg.fd, buf, len);
        (void)w;
    }
}

void mpt_rt_timespec_add_ms(struct timespec *t, uint64_t ms)
{
    t->tv_sec += (time_t)(ms / 1000);
    t->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

int mpt_rt_wait(sem_t *s, const struct timespec *deadline)
{
    int r;
    if (deadline != NULL)
        while ((r = sem_timedwait(s, deadline)) != 0 && errno == EINTR)
            ;
    else
        while ((r = sem_wait(s)) != 0 && errno == EINTR)
            ;
    return r;
}

unsigned mpt_rt_first_free_seq(const char *dir, pid_t pid, const char *suffix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    unsigned next = 0;
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, "heap.%ld.", (long)pid);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
            continue;
        char *end;
        unsigned long s = strtoul(e->d_name + plen, &end, 10);
        if (strcmp(end, suffix) == 0 && s + 1 > next)
            next = (unsigned)(s + 1);
    }
    closedir(d);
    return next;
}
