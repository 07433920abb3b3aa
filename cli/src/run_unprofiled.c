/* SPDX-License-Identifier: MIT */
/* Once the command ended: how many programs it executed ran unprofiled
 * (the notes runtime/rt_unprofiled.c leaves in the status directory),
 * and how to include them. `mimprof run -- pg_ctl start` profiles pg_ctl;
 * the shell it runs and the server that shell executes are programs
 * executed by a child, profiled only with --follow-exec. */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#define NAMED 4 /* distinct program names listed */

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

void mpt_run_unprofiled_say(const char *dir, bool quiet)
{
    if (dir[0] == '\0')
        return;
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    unsigned count = 0, nnames = 0;
    bool more = false; /* distinct names beyond the NAMED listed */
    char names[NAMED][64];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "unprofiled.", 11) != 0)
            continue;
        char target[PATH_MAX];
        ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
        unlinkat(dirfd(d), e->d_name, 0); /* not a status file: never printed */
        if (n <= 0)
            continue;
        target[n] = '\0';
        count++;
        const char *base = strrchr(target, '/') != NULL ? strrchr(target, '/') + 1 : target;
        bool known = false;
        for (unsigned i = 0; i < nnames && !known; i++)
            known = strcmp(names[i], base) == 0;
        if (!known && nnames < NAMED)
            snprintf(names[nnames++], sizeof names[0], "%.63s", base);
        else if (!known)
            more = true;
    }
    closedir(d);
    if (quiet || count == 0)
        return;
    qsort(names, nnames, sizeof names[0], by_name); /* readdir's order is no order */
    char list[NAMED * 66 + 8] = "";
    size_t off = 0;
    for (unsigned i = 0; i < nnames; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", names[i]);
    fprintf(stderr,
            "mimprof: %u program%s the command executed ran unprofiled (%s%s); "
            "--follow-exec profiles %s too\n",
            count, count == 1 ? "" : "s", list, more ? ", ..." : "", count == 1 ? "it" : "them");
}
