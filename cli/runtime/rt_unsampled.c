/* SPDX-License-Identifier: MIT */
/* The line a process says at exit when its profile stayed empty while
 * its memory grew (rt_state.h: mpt_rt_say_if_unsampled).
 *
 * The preload sees the malloc family only. A program with an allocator
 * of its own linked in (Rust's #[global_allocator], tcmalloc or jemalloc
 * linked statically) allocates without calling it, and its profile has
 * no sample and no word of why. Counting every call would cost the fast
 * path; the session's sample count and the process's peak resident set
 * tell the same at no cost: a process whose peak RSS reached several
 * sampling intervals through malloc is sampled (with at least 8
 * intervals, no sample has a chance under e^-8 = 0.03%), so zero samples
 * there means the memory came from elsewhere. A small program (a shell
 * command) never reaches the threshold and says nothing. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_state.h"

/* The least peak RSS that speaks, whatever the interval: below it a
 * program's libraries and stacks alone can account for it. */
#define MPT_UNSAMPLED_MIN_RSS (32u << 20)

/* VmHWM of /proc/self/status in bytes; 0 when unknown. No malloc. */
static uint64_t peak_rss(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *at = strstr(buf, "\nVmHWM:");
    return at != NULL ? strtoull(at + 7, NULL, 10) * 1024 : 0;
}

void mpt_rt_say_if_unsampled(uint64_t samples_taken)
{
    if (samples_taken != 0)
        return;
    uint64_t hwm = peak_rss();
    uint64_t enough = 8 * (uint64_t)mpt_rt.session_interval;
    if (hwm < MPT_UNSAMPLED_MIN_RSS || hwm < enough)
        return;
    say("mimprof: no allocation reached the profiler, yet the process grew to %llu MiB: its "
        "allocator is likely linked in (Rust #[global_allocator], tcmalloc or jemalloc), which "
        "the preload cannot see; profile a Rust program with the mimprof crate, or set "
        "MIMPROF_DISABLE=1 to run it without a session\n",
        (unsigned long long)(hwm >> 20));
}
