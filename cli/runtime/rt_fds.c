/* SPDX-License-Identifier: MIT */
/* The runtime's descriptors out of the program's way: whether that is
 * possible at all at the process's limit (mpt_rt_fds_room), and libcurl's
 * own descriptors.
 *
 * libcurl's: the adapter's connections are opened by its own socket callback (at the top of the
 * range, close-on-exec), but libcurl also makes socketpairs for itself:
 * its multi handle's wake-up pair, for as long as the agent runs, and one
 * per name resolution of its threaded resolver. They were made with
 * socketpair(2) at the lowest free numbers and without close-on-exec, so a
 * daemon that closes every descriptor got them back as its files, and
 * every program the profiled process executed inherited them.
 *
 * The preload comes before the C library in the lookup scope, so
 * libcurl's calls of socketpair() land here: once the runtime has loaded
 * the adapter (mpt_rt_fds_take_libcurl), a pair asked for from inside
 * libcurl is moved to the top of the range, close-on-exec
 * (mp_prof_fd_high). Every other caller gets the C library's socketpair()
 * unchanged. The one overlap: a program that itself uses libcurl, in a
 * process that uploads, gets its libcurl's internal pairs moved too (one
 * libcurl serves both). */
#define _GNU_SOURCE
#include "rt_common.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mimprof/profiling.h>

bool mpt_rt_fds_room(bool quiet)
{
    if (mp_prof_fd_room())
        return true;
    struct rlimit rl;
    char buf[400];
    int n = getrlimit(RLIMIT_NOFILE, &rl) == 0
                ? snprintf(buf, sizeof buf,
                           "mimprof: pid %ld not profiled: at its descriptor limit (%llu, hard "
                           "%llu) every descriptor the profiler kept would take a number the "
                           "program may need; raise the hard limit (ulimit -Hn) to profile it\n",
                           (long)getpid(), (unsigned long long)rl.rlim_cur,
                           (unsigned long long)rl.rlim_max)
                : 0;
    if (!quiet && n > 0 && (size_t)n < sizeof buf) {
        ssize_t w = write(2, buf, (size_t)n); /* no descriptor of ours: the program's stderr */
        (void)w;
    }
    return false;
}

static atomic_bool g_take_libcurl;

void mpt_rt_fds_take_libcurl(void) { atomic_store(&g_take_libcurl, true); }

/* Whether the code at `pc` belongs to libcurl. dladdr() takes the loader's
 * lock, which is fine here: socketpair() is never called from inside an
 * allocation. */
static int in_libcurl(const void *pc)
{
    Dl_info di;
    if (dladdr(pc, &di) == 0 || di.dli_fname == NULL)
        return 0;
    const char *base = strrchr(di.dli_fname, '/');
    return strncmp(base ? base + 1 : di.dli_fname, "libcurl", 7) == 0;
}

static int moved_high(int fd)
{
    fd = mp_prof_fd_high(fd);
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* also when there was no room above */
    return fd;
}

__attribute__((visibility("default"))) int socketpair(int domain, int type, int protocol, int sv[2])
{
    /* The system call itself: socketpair() is a plain system call in every
     * C library this runs on, and no symbol lookup is needed for it. */
    int rc = (int)syscall(SYS_socketpair, domain, type, protocol, sv);
    if (rc == 0 && atomic_load_explicit(&g_take_libcurl, memory_order_relaxed) &&
        in_libcurl(__builtin_return_address(0))) {
        sv[0] = moved_high(sv[0]);
        sv[1] = moved_high(sv[1]);
    }
    return rc;
}
