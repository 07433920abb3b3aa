/* SPDX-License-Identifier: MIT */
/* One look of the memory watch (cli/runtime/rt_watch.c, --report-above):
 * pread() of /proc/self/statm and the parse of its RSS field, 100,000
 * times; prints the CPU time of one look. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(void)
{
    int fd = open("/proc/self/statm", O_RDONLY);
    char buf[128];
    unsigned long long sum = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (int i = 0; i < 100000; i++) {
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n <= 0)
            return 1;
        buf[n] = 0;
        sum += strtoull(strchr(buf, ' ') + 1, NULL, 10);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    printf("%.2f us per look (%llu)\n",
           ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e5 / 1e3, sum % 7);
    return 0;
}
