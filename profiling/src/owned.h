/* SPDX-License-Identifier: MIT */
/* Descriptors the library keeps open in a program's process (the
 * control's sockets, src/control; a memory watch's file, watch.c),
 * checked before every use.
 *
 * The program may close any descriptor, the library's too (a daemon's
 * close_range(3, ~0U), closefrom()), and then get the same number back
 * from its own open() or accept(). A number alone therefore never says
 * "ours": each owned descriptor keeps the device and inode it was
 * opened on, and the library reads, writes, polls or closes it only
 * while fstat() still names that file. Once it does not, the library
 * forgets the number without touching it. Every owned descriptor must be
 * of a kind whose inode is its own (files, sockets, pipes; not eventfds,
 * which share one anonymous inode). Not installed. */
#ifndef MIMPROF_PROFILING_OWNED_H
#define MIMPROF_PROFILING_OWNED_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct mpc_owned {
    int fd; /* -1: none */
    dev_t dev;
    ino_t ino;
} mpc_owned;

#define MPC_OWNED_NONE ((mpc_owned){.fd = -1})

/* Takes `fd` (just opened by the library) and records what it names.
 * false (fd closed, o->fd = -1) when it cannot be identified. */
bool mpc_owned_take(mpc_owned *o, int fd);

/* Whether o->fd still names the file it was opened on. When it does not
 * (closed by the program, its number maybe reused), o->fd becomes -1 and
 * the number is left alone. */
bool mpc_owned_check(mpc_owned *o);

/* Closes o->fd if it is still ours; forgets it either way. */
void mpc_owned_close(mpc_owned *o);

/* (Moving a descriptor out of the program's way: mp_prof_fd_high,
 * profiling.h.) */

#endif
