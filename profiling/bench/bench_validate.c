/* SPDX-License-Identifier: MIT */
/* The cost of one memory validation of the unwinder, each way it can be
 * done (BENCHMARKS.md "Memory validation"):
 *   pipe     libunwind's own: read one byte from its pipe (drain), write
 *            one byte from the address into it -- two system calls and two
 *            descriptors in the program's range
 *   probe    unwind_nofd.c's: rt_sigprocmask with an invalid `how` -- one
 *            system call, no descriptor
 *   vmreadv  process_vm_readv of one byte from this process -- one system
 *            call, no descriptor (but in systemd's @debug set: a
 *            SystemCallFilter=@system-service unit is killed by it)
 * A program, not a test: median CPU time of interleaved rounds, and
 * callgrind's instruction count with `icount VARIANT N`.
 *
 *   bench_validate [ROUNDS]          ns per validation, each variant
 *   bench_validate icount VARIANT N  N validations (for callgrind) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
static char page[4096] __attribute__((aligned(4096))) = {1};

static int v_pipe(const void *addr)
{
    char b;
    ssize_t r = read(pfd[0], &b, 1);
    (void)r;
    return syscall(SYS_write, pfd[1], addr, 1) == 1;
}

static int v_probe(const void *addr)
{
    if (addr == NULL)
        return 0;
    return !(syscall(SYS_rt_sigprocmask, INT_MAX, addr, NULL, 8L) != 0 && errno == EFAULT);
}

static int v_vmreadv(const void *addr)
{
    char b;
    struct iovec l = {&b, 1}, r = {(void *)(uintptr_t)addr, 1};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1;
}

static const struct {
    const char *name;
    int (*fn)(const void *);
} V[] = {{"pipe", v_pipe}, {"probe", v_probe}, {"vmreadv", v_vmreadv}};
enum { NV = sizeof V / sizeof V[0] };

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0)
        return 1;
    if (argc == 4 && strcmp(argv[1], "icount") == 0) {
        long n = atol(argv[3]);
        for (int v = 0; v < NV; v++)
            if (strcmp(V[v].name, argv[2]) == 0)
                for (long i = 0; i < n; i++)
                    V[v].fn(page);
        return 0;
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 21;
    /* an address with nothing mapped: every variant must say invalid */
    void *gone = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    enum { N = 20000 };
    double *t[NV];
    for (int v = 0; v < NV; v++)
        t[v] = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < NV; v++) {
            int ok = 1;
            double a = cpu_ns();
            for (int i = 0; i < N; i++)
                ok &= V[v].fn(page);
            t[v][r] = (cpu_ns() - a) / N;
            if (!ok || V[v].fn(gone))
                return 2; /* a valid page passes, an unmapped one fails */
        }
    for (int v = 0; v < NV; v++) {
        qsort(t[v], (size_t)rounds, sizeof(double), cmp);
        printf("%-8s %8.1f ns per validation (CPU, median of %d rounds)\n", V[v].name,
               t[v][rounds / 2], rounds);
    }
    return 0;
}
