/* SPDX-License-Identifier: MIT */
/* What `mimprof run` prints once the command ended: the profiled
 * processes' status files and the reports they wrote. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

/* The private directory through which the profiled processes report
 * what `mimprof run` prints for them after the program ended (their
 * upload summaries: preload_runtime.h, MIMPROF_STATUS_DIR). A file path,
 * not a descriptor: it works whatever the program does with its
 * descriptors (a program that closes stderr at exit, or every descriptor
 * at start), and the program sees no descriptor of ours. "" when it
 * cannot be made (the processes then write to their stderr). */
void mpt_run_status_dir_make(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/')
        tmp = "/tmp";
    if (snprintf(dir, cap, "%s/mimprof-run-XXXXXX", tmp) >= (int)cap || mkdtemp(dir) == NULL ||
        setenv("MIMPROF_STATUS_DIR", dir, 1) != 0)
        dir[0] = '\0';
}

/* Prints every process's status file (in name order) and removes them
 * and the directory. */
void mpt_run_status_dir_print(const char *dir)
{
    if (dir[0] == '\0')
        return;
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char path[4400];
        if (names[i]->d_name[0] != '.' &&
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) < (int)sizeof path) {
            int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            char buf[4096];
            ssize_t r;
            while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0)
                fwrite(buf, 1, (size_t)r, stderr);
            if (fd >= 0)
                close(fd);
            unlink(path);
        }
        free(names[i]);
    }
    free(names);
    rmdir(dir);
}

void mpt_run_summarize(const char *dir, time_t since, pid_t pid, bool quiet)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    unsigned count = 0, best_seq = 0;
    char best[NAME_MAX + 1] = "";
    bool best_is_pid = false;
    struct timespec best_t = {0, 0};
    struct dirent *e;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "heap.%ld.", (long)pid);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "heap.", 5) != 0 || len < 11 ||
            strcmp(e->d_name + len - 6, ".pb.gz") != 0 ||
            (len > 11 && strcmp(e->d_name + len - 11, ".peak.pb.gz") == 0))
            continue; /* reports only: a peak profile goes with its report */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || st.st_mtime < since)
            continue;
        count++;
        bool is_pid = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
        unsigned seq = is_pid ? (unsigned)strtoul(e->d_name + strlen(prefix), NULL, 10) : 0;
        bool newer = st.st_mtim.tv_sec > best_t.tv_sec ||
                     (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec);
        if ((is_pid && (!best_is_pid || seq >= best_seq)) || (!is_pid && !best_is_pid && newer)) {
            snprintf(best, sizeof best, "%s", e->d_name);
            best_is_pid = is_pid;
            best_seq = seq;
            best_t = st.st_mtim;
        }
    }
    closedir(d);
    if (quiet)
        return;
    if (count == 0)
        fprintf(stderr, "mimprof: no profile written to %s\n", dir);
    else
        fprintf(stderr, "mimprof: %u profile%s in %s; last: %s/%s\n", count, count == 1 ? "" : "s",
                dir, dir, best);
}
