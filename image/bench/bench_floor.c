/* What a load of a given image cannot go below on this machine: the cost
 * of the memory work every load does, without any checking.
 *
 *   bench-floor IMAGE [ROUNDS]
 *
 * Each step runs ROUNDS times in a fresh child process (as a boot does)
 * and reports its best and median CPU time (user + system):
 *   map     open the file and map it populated (MAP_POPULATE), as the loader
 *   zero    first-touch a fresh block of the file's size (2 MiB pages, as
 *           the loader's heap): the kernel zero-fills it
 *   copy    map + zero + copy the object region into the block (the least
 *           a load that builds a private heap must do)
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

static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *path;
static volatile uint64_t sink; /* keeps the work from being optimised away */

static const unsigned char *map_file(size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb))
        _exit(1);
    *len = (size_t)sb.st_size;
    void *m = mmap(NULL, *len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        _exit(1);
    return m;
}

static unsigned char *fresh(size_t len)
{
    int mapped;
    unsigned char *b = img_big_alloc_lazy(len, &mapped);
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
        size_t len;
        const unsigned char *m = map_file(&len);
        if (which == 1) {
            c0 = cpu(); /* zero alone */
            touch(fresh(len), len);
        } else if (which == 2) {
            struct img_header hd;
            memcpy(&hd, m, sizeof hd);
            size_t at = sizeof hd + hd.types_size + hd.foreign_size + hd.roots_size;
            if (at > len || hd.objects_size > len - at)
                _exit(1);
            unsigned char *b = fresh(len);
            memcpy(b, m + at, hd.objects_size);
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
        "open + mmap(MAP_POPULATE) of the file",
        "first touch of a fresh block of the file's size (2 MiB pages)",
        "map + zero + copy of the object region into it",
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
