/* SPDX-License-Identifier: MIT */
/* A daemon-like program for test_run.py's Descriptors test: it closes descriptors 0-1023, reopens 0-2 on /dev/null, opens
 * a read-write data file and a write-only log, then allocates from many
 * call sites while using both. It writes its /proc/self/fd table at three
 * points (after opening its files, halfway, at the end) to DIR/tables,
 * opened last, and exits 1 when a read-back of its own data is wrong.
 *
 * usage: mimprof-test-daemon-fds DIR */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

/* Frames of a page or more, at many depths: the unwinder keeps meeting
 * return addresses and stack pages it has not seen. */
__attribute__((noinline)) static void deep(int n, size_t size)
{
    volatile char pad[4500];
    pad[0] = (char)n;
    if (n > 0)
        deep(n - 1, size);
    else {
        sink = malloc(size);
        free(sink);
    }
    __asm__ volatile("" : : "g"(pad[0]) : "memory");
}

/* "fd -> target [(cloexec)]" lines of every descriptor but the
 * listing's own. */
static size_t table(char *out, size_t cap)
{
    size_t o = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
            continue;
        char link[300], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        int cloexec = fcntl(atoi(e->d_name), F_GETFD) & FD_CLOEXEC;
        int w = snprintf(out + o, cap - o, "%s -> %s%s\n", e->d_name, target,
                         cloexec ? " (cloexec)" : "");
        if (w > 0 && (size_t)w < cap - o)
            o += (size_t)w;
    }
    closedir(d);
    return o;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    static char tables[3][8192];
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    open("/dev/null", O_RDONLY);
    open("/dev/null", O_WRONLY);
    open("/dev/null", O_WRONLY);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    int data = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    snprintf(path, sizeof path, "%s/log", argv[1]);
    int log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    table(tables[0], sizeof tables[0]);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        char rec[32], back[32];
        memset(rec, 'a' + i % 26, sizeof rec);
        if (write(data, rec, sizeof rec) != (ssize_t)sizeof rec)
            bad = 1;
        deep(i % 19, 2048 + (size_t)i * 61 % 40000);
        if (lseek(data, -(off_t)sizeof rec, SEEK_CUR) < 0 ||
            read(data, back, sizeof back) != (ssize_t)sizeof back || memcmp(back, rec, 32) != 0)
            bad = 1;
        char line[32];
        int n = snprintf(line, sizeof line, "%d\n", i);
        if (write(log, line, (size_t)n) != n)
            bad = 1;
        if (i == 1000)
            table(tables[1], sizeof tables[1]);
    }
    table(tables[2], sizeof tables[2]);
    snprintf(path, sizeof path, "%s/tables", argv[1]);
    FILE *t = fopen(path, "w");
    if (t == NULL)
        return 3;
    fprintf(t, "%s--\n%s--\n%s", tables[0], tables[1], tables[2]);
    fclose(t);
    return bad;
}
