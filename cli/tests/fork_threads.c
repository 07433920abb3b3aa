/* SPDX-License-Identifier: MIT */
/* A threaded program that forks (issue 39): four threads allocate and
 * free along varied call paths while the main thread forks N children in
 * turn; each child allocates, then ends by _exit(), by exit() (its exit
 * report), or by exec of /bin/true, by turns. Exits 0 when every child
 * exited 0; a child that hangs hangs the program (test_run.py's
 * ForkWithThreads dumps the stacks and fails). Usage: fork_threads N */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

/* Different depths and sites, so that captures keep meeting new frames. */
static __attribute__((noinline)) void *alloc_at(unsigned depth, size_t n)
{
    if (depth == 0)
        return malloc(n);
    void *p = alloc_at(depth - 1, n + 8);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *keep[64] = {0};
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 64;
        free(keep[k]);
        keep[k] = alloc_at((seed >> 16) % 24, 64 + (seed >> 4) % 4000);
    }
    for (int k = 0; k < 64; k++)
        free(keep[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            char *p = alloc_at((unsigned)i % 16, 100000);
            memset(p, 1, 100000);
            free(p);
            if (i % 3 == 0)
                _exit(0);
            if (i % 3 == 1)
                exit(0);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "fork_threads: child %d ended with status %#x\n", i, (unsigned)status);
            bad++;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return bad != 0;
}
