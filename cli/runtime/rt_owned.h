/* SPDX-License-Identifier: MIT */
/* Descriptors the preload runtime owns, checked before every use.
 *
 * The program may close any descriptor, the runtime's too (a daemon's
 * close_range(3, ~0U), closefrom()), and then get the same number back
 * from its own open() or accept(). A number alone therefore never says
 * "ours": each owned descriptor keeps the device and inode it was
 * opened on, and the runtime reads, writes, polls or closes it only
 * while fstat() still names that file. Once it does not, the runtime
 * forgets the number without touching it. Every owned descriptor must be
 * of a kind whose inode is its own (files, sockets, pipes; not eventfds,
 * which share one anonymous inode). Not installed. */
#ifndef MIMPROF_TOOL_RT_OWNED_H
#define MIMPROF_TOOL_RT_OWNED_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct mpt_owned {
    int fd; /* -1: none */
    dev_t dev;
    ino_t ino;
} mpt_owned;

#define MPT_OWNED_NONE ((mpt_owned){.fd = -1})

/* Takes `fd` (just opened by the runtime) and records what it names.
 * false (fd closed, o->fd = -1) when it cannot be identified. */
bool mpt_owned_take(mpt_owned *o, int fd);

/* Whether o->fd still names the file it was opened on. When it does not
 * (closed by the program, its number maybe reused), o->fd becomes -1 and
 * the number is left alone. */
bool mpt_owned_check(mpt_owned *o);

/* Closes o->fd if it is still ours; forgets it either way. */
void mpt_owned_close(mpt_owned *o);

#endif
