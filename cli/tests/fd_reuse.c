/* SPDX-License-Identifier: MIT */
/* A daemon that closes every descriptor (close_range(3, ~0U)) and then
 * puts its own listening socket on every number up to its limit (at most
 * 4096), so that any number the profiler's runtime held before is now
 * the program's. It then talks to itself through that socket for about
 * 1.5 s: ten connections, each must be accepted by the program and carry
 * its bytes. Prints its CPU time; exits 0 when every exchange worked.
 * test_run.py runs it plain and under mimprof run (running and dormant).
 *
 * usage: mimprof-test-fd-reuse */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int close_all(void)
{
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
        return 0;
    for (int fd = 3; fd < 65536; fd++)
        close(fd);
    return 0;
}

static socklen_t address(struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "mimprof-test-fd-reuse.%ld",
                     (long)getpid());
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* One exchange: connect, write, the program's accept gets it, reads it. */
static int exchange(int lfd, int round)
{
    struct sockaddr_un a;
    socklen_t alen = address(&a);
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&a, alen) != 0)
        return -1;
    char msg[32], got[32] = "";
    int n = snprintf(msg, sizeof msg, "ping %d", round);
    if (write(c, msg, (size_t)n) != n)
        return -1;
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    int s = -1;
    if (poll(&pf, 1, 1000) == 1)
        s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    int ok = -1;
    if (s >= 0 && read(s, got, sizeof got - 1) == n && memcmp(got, msg, (size_t)n) == 0)
        ok = 0;
    if (s >= 0)
        close(s);
    close(c);
    return ok;
}

int main(void)
{
    close_all();
    struct sockaddr_un a;
    socklen_t alen = address(&a);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, alen) != 0 || listen(lfd, 16) != 0) {
        perror("listen");
        return 2;
    }
    struct rlimit rl;
    int top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 ? (int)rl.rlim_cur : 4096;
    for (int fd = 3; fd < top; fd++)
        if (fd != lfd)
            dup3(lfd, fd, O_CLOEXEC);
    int failed = 0;
    for (int round = 0; round < 10; round++) {
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
        failed += exchange(lfd, round) != 0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("cpu %.3f failed %d\n",
           (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
           failed);
    return failed ? 1 : 0;
}
