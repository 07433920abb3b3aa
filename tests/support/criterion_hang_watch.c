/* SPDX-License-Identifier: MIT */
/* Stacks on a Criterion test's timeout (issue 39). ./dev links this object
 * into every Criterion test program of its gcc and ASan trees (the
 * criterion.pc it writes into build-criterion-watch/). Criterion runs each
 * test in a worker process (BoxFort re-executes the program as
 * "boxfort-worker") and ends one that outlives its .timeout with SIGPROF.
 * In a worker, that SIGPROF first writes the stacks of every thread of the
 * worker and of its children to the worker's stderr (tests/support/
 * hang_dump.sh, gdb -batch), then ends the worker as before: a hang names
 * its cause in the test log.
 *
 * The handler runs in a process that may be deadlocked anywhere, so it
 * calls no lock-taking function: the dumper is started with a raw clone()
 * (fork() would run the profiler's fork handlers, whose locks may be the
 * hung ones) and exec'd at once. A process that blocks SIGPROF in every
 * thread never runs it; meson's own timeout then dumps from outside
 * (tests/support/hang_watch.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MP_HANG_DUMP
#error "build with -DMP_HANG_DUMP=\"/path/to/tests/support/hang_dump.sh\""
#endif

static void say(const char *s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

static void decimal(long v, char *out)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *out++ = tmp[--n];
    *out = '\0';
}

static void on_timeout(int sig)
{
    int saved = errno;
    char pid[24];
    decimal((long)getpid(), pid);
    say("\nhang_watch: the test timed out; the stacks of its processes:\n");
    long child = syscall(SYS_clone, (unsigned long)SIGCHLD, 0UL, 0UL, 0UL, 0UL);
    if (child == 0) {
        execl("/bin/sh", "sh", MP_HANG_DUMP, pid, (char *)NULL);
        _exit(127);
    }
    if (child > 0)
        while (waitpid((pid_t)child, NULL, 0) < 0 && errno == EINTR)
            ;
    errno = saved;
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void arm_in_worker(void)
{
    char argv0[32] = {0};
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)!read(fd, argv0, sizeof argv0 - 1);
    close(fd);
    if (strcmp(argv0, "boxfort-worker") != 0)
        return; /* the runner, or a program the test runs */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_timeout;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
}
