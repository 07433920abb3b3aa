/* SPDX-License-Identifier: MIT */
/* A program with known phases (the ages and peak tests): keep_site allocates
 * 40 MiB at the start and keeps it, spike_site allocates 120 MiB that is
 * then freed, late_site allocates 20 MiB just before the end. Blocks of
 * 64 KiB, written to, so that they are resident.
 *
 *   mimprof-test-phases [DIR]
 *
 * With DIR, the spike stays live until a report (heap.*.pb.gz, not a
 * peak) appears in DIR, at most 120 s, so that a test of --report-above
 * does not depend on how fast the machine is; it prints how long that
 * took ("fired after S s") and when the spike was complete. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK ((size_t)64 << 10)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Exported and not inlined: the reports name them. */
void keep_site(void **v, size_t n);
void spike_site(void **v, size_t n);
void late_site(void **v, size_t n);
#define SITE(name)                                                                                 \
    __attribute__((noinline)) void name(void **v, size_t n)                                        \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            v[i] = malloc(BLOCK);                                                                  \
            if (v[i] == NULL)                                                                      \
                exit(3);                                                                           \
            memset(v[i], (int)i, BLOCK);                                                           \
        }                                                                                          \
        __asm__ volatile("" : : "g"(v) : "memory");                                                \
    }
SITE(keep_site)
SITE(spike_site)
SITE(late_site)

static int report_in(const char *dir)
{
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d != NULL && !found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        found = strncmp(e->d_name, "heap.", 5) == 0 && n > 6 &&
                strcmp(e->d_name + n - 6, ".pb.gz") == 0 && strstr(e->d_name, ".peak.") == NULL;
    }
    if (d != NULL)
        closedir(d);
    return found;
}

int main(int argc, char **argv)
{
    static void *keep[40 << 4], *spike[120 << 4], *late[20 << 4];
    keep_site(keep, 40 << 4);
    spike_site(spike, 120 << 4);
    double done = now_s();
    if (argc > 1) {
        while (!report_in(argv[1]) && now_s() - done < 120) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        printf("fired after %.3f s\n", now_s() - done);
    }
    for (size_t i = 0; i < 120 << 4; i++)
        free(spike[i]);
    late_site(late, 20 << 4);
    printf("done\n");
    return 0;
}
