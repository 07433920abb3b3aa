/* SPDX-License-Identifier: MIT */
/* A program that knows nothing of mimprof: run by test_preload.c under
 * LD_PRELOAD=libmimprof-preload-<provider>.so. It allocates a known
 * population through the plain malloc family and prints what it did.
 *
 *   preload_target MODE
 *     population  50,000 x 1000 B malloc'd and freed (half through calloc,
 *                 some realloc'd in place), 2,000 x 10,000 B kept live at
 *                 exit (posix_memalign'd), 3 threads doing the same
 *                 churn on a smaller scale
 *     fork        the population's freed part in the parent; the child
 *                 allocates 20,000 x 3000 B and keeps 500 x 8000 B; the
 *                 parent waits for it
 *   It prints "pid=<pid>" (and "child=<pid>" in fork mode). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *sink; /* defeats malloc/free elision */

static void churn(unsigned n, size_t size)
{
    for (unsigned i = 0; i < n; i++) {
        char *p = i % 2 ? calloc(1, size) : malloc(size);
        if (p == NULL)
            exit(3);
        p[0] = (char)i;
        sink = p;
        if (i % 10 == 0) {
            char *q = realloc(p, size); /* same size: an event, stays */
            if (q == NULL)
                exit(3);
            p = q;
        }
        free(p);
    }
}

static void *thread_churn(void *arg)
{
    (void)arg;
    churn(5000, 1000);
    return NULL;
}

static void **keep(unsigned n, size_t size)
{
    void **v = malloc(n * sizeof *v);
    for (unsigned i = 0; i < n; i++) {
        if (posix_memalign(&v[i], 64, size) != 0)
            exit(3);
        memset(v[i], 1, 64);
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "population";
    printf("pid=%ld\n", (long)getpid());
    fflush(stdout);
    if (strcmp(mode, "population") == 0) {
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, thread_churn, NULL);
        churn(50000, 1000);
        sink = keep(2000, 10000); /* leaked on purpose: inuse at exit */
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        churn(50000, 1000);
        pid_t pid = fork();
        if (pid == 0) {
            churn(20000, 3000);
            sink = keep(500, 8000);
            exit(0);
        }
        printf("child=%ld\n", (long)pid);
        fflush(stdout);
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 4;
        return 0;
    }
    return 2;
}
