/* SPDX-License-Identifier: MIT */
/* The collector as the host of this process's control socket
 * (rt_ctlhost.h). */
#define _GNU_SOURCE
#include "rt_ctlhost.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "rt_collector.h"

/* The page shared with the collector; written at start and in a fork
 * child (single-threaded), read by the control thread. */
static mpt_coll_page *g_page;
static uint32_t g_seen;     /* the control thread's: the last seq it took at */
static atomic_bool g_woken; /* wake() was called: take() returns */

static int make_memfd(void *ctx)
{
    (void)ctx;
    return memfd_create("mimprof-ctl", MFD_CLOEXEC);
}

/* A new page (mapped into g_page) and its memfd, or -1. */
static int new_page(void)
{
    int fd = mp_prof_fd_make(make_memfd, NULL);
    if (fd < 0)
        return -1;
    void *m = ftruncate(fd, MPT_COLL_PAGE) == 0
                  ? mmap(NULL, MPT_COLL_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    if (m == MAP_FAILED) {
        close(fd);
        return -1;
    }
    g_page = m;
    g_seen = 0;
    atomic_store(&g_woken, false);
    return fd;
}

static void drop_page(void)
{
    if (g_page != NULL)
        munmap(g_page, MPT_COLL_PAGE);
    g_page = NULL;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t v, int timeout_ms)
{
    struct timespec t = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    /* Not FUTEX_PRIVATE: the collector wakes it from its own process. */
    syscall(SYS_futex, w, FUTEX_WAIT, v, timeout_ms < 0 ? NULL : &t, NULL, 0);
}

static int take(void *ctx, int *fds, int max, int timeout_ms)
{
    (void)ctx;
    if (g_page == NULL)
        return -1;
    uint32_t v = atomic_load(&g_page->seq);
    if (v == g_seen && !atomic_load(&g_woken) && timeout_ms != 0) {
        futex_wait(&g_page->seq, v, timeout_ms);
        v = atomic_load(&g_page->seq);
    }
    if (atomic_exchange(&g_woken, false)) {
        g_seen = v; /* a stop: what the collector holds waits for the next take */
        return 0;
    }
    if (v == g_seen)
        return 0;
    g_seen = v;
    int n = mpt_coll_fetch(fds, max);
    return n < 0 ? 0 : n; /* a collector gone: nothing comes, nothing is lost here */
}

/* A bump of the word take() waits on, so a wake that comes just before
 * the wait is not lost. */
static void wake(void *ctx)
{
    (void)ctx;
    atomic_store(&g_woken, true);
    if (g_page != NULL) {
        atomic_fetch_add(&g_page->seq, 1);
        syscall(SYS_futex, &g_page->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

static const mp_prof_control_host HOST = {.ctx = NULL, .take = take, .wake = wake};

const mp_prof_control_host *mpt_ctlhost_hello(bool host_control, bool at_start)
{
    int pfd = host_control ? new_page() : -1;
    int r = mpt_coll_hello(pfd, at_start && pfd >= 0);
    if (pfd >= 0)
        close(pfd);
    if (r != 0)
        drop_page(); /* no collector to host it */
    return g_page != NULL ? &HOST : NULL;
}

void mpt_ctlhost_after_fork(bool profiled, bool serves)
{
    bool hosted = g_page != NULL;
    drop_page();
    if (profiled)
        (void)mpt_ctlhost_hello(serves && hosted, false);
}
