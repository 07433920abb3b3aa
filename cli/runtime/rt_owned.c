/* SPDX-License-Identifier: MIT */
/* Identity-checked descriptors of the preload runtime (rt_owned.h). */
#include "rt_owned.h"

#include <sys/stat.h>
#include <unistd.h>

bool mpt_owned_take(mpt_owned *o, int fd)
{
    struct stat st;
    *o = MPT_OWNED_NONE;
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

bool mpt_owned_check(mpt_owned *o)
{
    struct stat st;
    if (o->fd < 0)
        return false;
    if (fstat(o->fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino)
        return true;
    o->fd = -1;
    return false;
}

void mpt_owned_close(mpt_owned *o)
{
    if (mpt_owned_check(o))
        close(o->fd);
    o->fd = -1;
}
