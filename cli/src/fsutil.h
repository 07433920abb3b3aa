/* SPDX-License-Identifier: MIT */
/* Internal to the mimprof command and its preload runtime: creating
 * directories (mkdir -p). No allocation; safe to call from the preload's
 * constructor. */
#ifndef MIMPROF_TOOL_FSUTIL_H
#define MIMPROF_TOOL_FSUTIL_H

/* Creates `path` and its missing parents (mode 0755); components that
 * already exist are fine, whatever they are. 0, or -1 with errno
 * (ENAMETOOLONG for a path of PATH_MAX characters or more). */
int mpt_mkdir_p(const char *path);

/* mpt_mkdir_p(path), and then `path` must be a directory: -1 with errno
 * ENOTDIR when it is something else. */
int mpt_mkdir_dir(const char *path);

/* Whether files can be created in the directory `path`: a file is
 * created and removed there (access(2) says yes to root on a read-only
 * file system and on /proc). 0, or -1 with errno. */
int mpt_dir_writable(const char *path);

#endif
