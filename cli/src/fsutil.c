/* SPDX-License-Identifier: MIT */
/* Creating directories (fsutil.h). */
#define _GNU_SOURCE
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int mpt_mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

int mpt_mkdir_dir(const char *path)
{
    if (mpt_mkdir_p(path) != 0)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int mpt_dir_writable(const char *path)
{
    char probe[PATH_MAX];
    if (snprintf(probe, sizeof probe, "%s/.mimprof-probe.%ld.tmp", path, (long)getpid()) >=
        (int)sizeof probe) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(probe);
    return 0;
}
