/* SPDX-License-Identifier: MIT */
/* Opens /dev/null until the descriptor limit refuses (EMFILE) and prints
 * the numbers it got, as ranges ("3-63"): what a program that fills its
 * descriptor table gets, plainly and under mimprof run (tool-run's
 * descriptor-limit test compares the two). Exits 0 on EMFILE, 1 on any
 * other error. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int first = -1, last = -2, fd, err = 0;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0 || (err = errno) == EINTR) {
        if (fd < 0)
            continue;
        if (fd != last + 1) {
            if (first >= 0)
                printf("%d-%d\n", first, last);
            first = fd;
        }
        last = fd;
    }
    if (first >= 0)
        printf("%d-%d\n", first, last);
    if (err != EMFILE) { /* (printf may have changed errno) */
        fprintf(stderr, "fd_fill: %s\n", strerror(err));
        return 1;
    }
    return 0;
}
