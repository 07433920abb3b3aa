/* SPDX-License-Identifier: MIT */
/* What a load of a given image cannot go below on this machine: the cost
 * of the memory work every load does, without any checking.
 *
 *   bench-floor IMAGE [ROUNDS]
 *
 * Each step runs ROUNDS times in a fresh child process (as a boot does)
 * and reports its best and median CPU time (user + system):
 *   map     open the file, map it (as the loader: no MAP_POPULATE) and read
 *           a byte of every cache line (faults + the file from memory)
 *   zero    first-touch a fresh block of the loaded heap's size (the region
 *           in memory and the blob; 2 MiB pages, as the loader's heap): the
 *           kernel zero-fills it
 *   copy    map + zero + copy the file's object region and blob into the
 *           block (the least a load that builds a private heap must move)
 *   hash    map + the image checksum (XXH3-64) over the file
 * BENCHMARKS.md compares these with the load itself (bench-boot). */
#define _GNU_SOURCE
#include "checksum.h"
#include "format.h"
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static const char *path;
static volatile uint64_t sink; /* keeps the work from being optimised away */

static const unsigned char *map_file(size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb))
        _exit(1);
    *len = (size_t)sb.st_size;
    void *m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        _exit(1);
    return m;
}

/* The heap a load of the mapped image builds: the region in memory and
 * the blob, and where the file holds them. */
static size_t heap_size(const unsigned char *m, size_t len, size_t *region_at, size_t *file_bytes)
{
    struct img_header hd;
    if (len < sizeof hd)
        _exit(1);
    memcpy(&hd, m, sizeof hd);
    *region_at = sizeof hd + hd.types_size + hd.foreign_size + hd.roots_size;
    *file_bytes = hd.objects_size;
    if (*region_at > len || hd.objects_size > len - *region_at)
        _exit(1);
    return hd.region_words * 8 + hd.n_bytes;
}

static unsigned char *fresh(size_t len)
{
    int mapped;
    unsigned char *b = img_big_alloc_lazy(img_big_size(len), &mapped);
    if (!b)
        _exit(1);
    return b;
}

static void touch(unsigned char *b, size_t len)
{
    for (size_t o = 0; o < len; o += 4096)
        ((volatile unsigned char *)b)[o] = 0;
}

/* One step in a fresh process; its CPU time. */
static double step(int which)
{
    int fds[2];
    if (pipe(fds))
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        double c0 = cpu();
        size_t len, at, file_bytes;
        const unsigned char *m = map_file(&len);
        const size_t heap = heap_size(m, len, &at, &file_bytes);
        if (which == 0) {
            uint64_t acc = 0;
            for (size_t o = 0; o < len; o += 64)
                acc += m[o];
            sink = acc;
        } else if (which == 1) {
            c0 = cpu(); /* zero alone */
            touch(fresh(heap), heap);
        } else if (which == 2) {
            unsigned char *b = fresh(heap);
            memcpy(b, m + at, len - at); /* region, shape table, blob */
            touch(b, heap);              /* the rest of the heap */
            sink = b[0];
        } else if (which == 3) {
            sink = img_hash(m + IMG_CHECKSUM_FROM, len - IMG_CHECKSUM_FROM);
        }
        double t = cpu() - c0;
        if (write(fds[1], &t, sizeof t) != (ssize_t)sizeof t)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    double t = -1;
    if (read(fds[0], &t, sizeof t) != (ssize_t)sizeof t)
        exit(1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-floor: a step failed\n");
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: bench-floor IMAGE [ROUNDS]\n", stderr);
        return 2;
    }
    path = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (rounds < 1)
        rounds = 1;
    static const char *const names[] = {"map", "zero", "copy", "hash"};
    static const char *const what[] = {
        "open + mmap of the file, a byte of every cache line read",
        "first touch of a fresh block of the loaded heap's size (2 MiB pages)",
        "map + zero + copy of the file's region and blob into it",
        "map + XXH3-64 of the file",
    };
    double *t = calloc((size_t)rounds * 4, sizeof *t);
    for (int r = 0; r < rounds; r++) /* interleaved, so drift hits all */
        for (int s = 0; s < 4; s++)
            t[s * rounds + r] = step(s);
    for (int s = 0; s < 4; s++) {
        qsort(t + s * rounds, (size_t)rounds, sizeof *t, cmp);
        printf("%-5s cpu best %6.2f ms median %6.2f ms  %s\n", names[s], t[s * rounds] * 1e3,
               t[s * rounds + rounds / 2] * 1e3, what[s]);
    }
    free(t);
    return 0;
}
