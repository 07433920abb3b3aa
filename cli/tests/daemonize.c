/* SPDX-License-Identifier: MIT */
/* A service that daemonizes the way redis-server --daemonize yes and
 * nginx do: the started process forks and exits at once; the daemon
 * makes a session of its own, puts /dev/null on 0-2 (closing nothing
 * else), writes its pid to PIDFILE, allocates, and lives SECONDS, then
 * exits. test_collector.py runs it inside $(...) to see that `mimprof
 * run` returns as the plain program does.
 *
 * usage: mimprof-test-daemonize PIDFILE SECONDS */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    printf("starting\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid > 0)
        return 0; /* the started process: done, as a daemon's launcher is */
    setsid();
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2)
        close(null);
    FILE *f = fopen(argv[1], "w");
    if (f == NULL)
        return 1;
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    for (int i = 0; i < 1000; i++) {
        sink = malloc(4096);
        memset(sink, 1, 4096);
    }
    sleep((unsigned)atoi(argv[2]));
    return 0;
}
