/* SPDX-License-Identifier: MIT */
/* Identity-checked descriptors (owned.h). */
#include "owned.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

bool mpc_owned_take(mpc_owned *o, int fd)
{
    struct stat st;
    *o = MPC_OWNED_NONE;
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

bool mpc_owned_check(mpc_owned *o)
{
    struct stat st;
    if (o->fd < 0)
        return false;
    if (fstat(o->fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino)
        return true;
    o->fd = -1;
    return false;
}

void mpc_owned_close(mpc_owned *o)
{
    if (mpc_owned_check(o))
        close(o->fd);
    o->fd = -1;
}
