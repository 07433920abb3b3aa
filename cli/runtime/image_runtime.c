/* SPDX-License-Identifier: MIT */
/* Heap images in the preload runtime (image_runtime.h). */
#define _GNU_SOURCE
#include "image_runtime.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "rt_common.h"
#include "rt_env.h"
#include "rt_output.h"

static struct {
    bool on; /* MIMPROF_IMAGE is set */
    bool quiet;
    char dir[4096];    /* absolute */
    uint64_t every_ms; /* 0: none periodic */
    bool on_exit;
    mp_profiler *prof; /* the running session, while the thread runs */
    pid_t pid;
    unsigned seq;
    pthread_t th;
    bool have_th;
    sem_t wake;
    atomic_bool stop;
    atomic_bool req;
} im;

/* Messages on stderr, unless MIMPROF_QUIET. */
#define say(...) mpt_rt_say(im.quiet, __VA_ARGS__)

int mpt_rt_image_configure(bool quiet)
{
    im.quiet = quiet;
    /* Parsed by mpt_env_load() (a malformed value was refused there). */
    const char *dir = mpt_env(MPT_ENV_IMAGE)->text;
    bool want_every = mpt_env(MPT_ENV_IMAGE_EVERY)->set;
    bool want_exit = mpt_env_flag(MPT_ENV_IMAGE_ON_EXIT, false);
    if (dir == NULL) {
        if (want_every || want_exit) {
            mpt_rt_say(
                false,
                "mimprof: MIMPROF_IMAGE_EVERY and MIMPROF_IMAGE_ON_EXIT need MIMPROF_IMAGE=DIR; "
                "profiling disabled\n");
            return -1;
        }
        return 0;
    }
    im.every_ms = mpt_env(MPT_ENV_IMAGE_EVERY)->num;
    if (want_every && im.every_ms == 0) {
        mpt_rt_say(false,
                   "mimprof: MIMPROF_IMAGE_EVERY=0 is not a period (e.g. 10s, 500ms); profiling "
                   "disabled\n");
        return -1;
    }
    char cwd[4096];
    int n = dir[0] == '/'                     ? snprintf(im.dir, sizeof im.dir, "%s", dir)
            : getcwd(cwd, sizeof cwd) != NULL ? snprintf(im.dir, sizeof im.dir, "%s/%s", cwd, dir)
                                              : -1;
    if (n < 0 || (size_t)n >= sizeof im.dir || mpt_mkdir_dir(im.dir) != 0) {
        mpt_rt_say(false,
                   "mimprof: MIMPROF_IMAGE=%s is not a usable directory; profiling disabled\n",
                   dir);
        return -1;
    }
    im.on_exit = want_exit;
    im.on = true;
    return 0;
}

static void image_once(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/heap.%ld.%u.mpimg", im.dir, (long)im.pid, im.seq++);
    /* The image writer renames over its path: never over anything but a
     * regular file (rt_output.h's rule). */
    char real[4096], why[600];
    if (mpt_out_target(path, real, sizeof real, why, sizeof why) != 0) {
        mpt_rt_say(false, "mimprof: heap image: %s\n", why);
        return;
    }
    mp_prof_status st = mp_profiler_write_image(im.prof, path);
    if (st != MP_PROF_OK)
        mpt_rt_say(false, "mimprof: heap image %s not written: %s\n", path, mp_prof_strerror(st));
}

static void *image_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    mp_prof_thread_exclude(); /* its allocations are the profiler's */
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    for (;;) {
        if (im.every_ms > 0)
            mpt_rt_timespec_add_ms(&next, im.every_ms);
        int r = mpt_rt_wait(&im.wake, im.every_ms > 0 ? &next : NULL);
        if (atomic_load(&im.stop))
            break;
        if (r == 0 && !atomic_exchange(&im.req, false))
            continue; /* a stale post */
        if (r != 0) {
            /* after a stall (suspended process) from now, without catching up */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            if (now.tv_sec > next.tv_sec)
                next = now;
        }
        image_once();
    }
    return NULL;
}

void mpt_rt_image_prepare(void)
{
    if (!im.on)
        return;
    im.pid = getpid();
    im.seq = mpt_rt_first_free_seq(im.dir, im.pid, ".mpimg");
}

void mpt_rt_image_start(mp_profiler *prof)
{
    if (!im.on)
        return;
    im.prof = prof;
    atomic_store(&im.stop, false);
    atomic_store(&im.req, false);
    sem_init(&im.wake, 0, 0);
    /* Born with every signal blocked (rt_signals.h): no process-directed
     * signal ever lands on this thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    im.have_th = pthread_create(&im.th, NULL, image_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!im.have_th)
        say("mimprof: no image thread in pid %ld: images only at exit\n", (long)im.pid);
}

void mpt_rt_image_request(void)
{
    if (!im.on || !im.have_th)
        return;
    atomic_store(&im.req, true);
    sem_post(&im.wake);
}

void mpt_rt_image_after_fork(void)
{
    im.have_th = false;
    im.prof = NULL;
}

void mpt_rt_image_stop(bool at_exit)
{
    if (!im.on || im.prof == NULL || im.pid != getpid())
        return;
    if (im.have_th) {
        atomic_store(&im.stop, true);
        sem_post(&im.wake);
        pthread_join(im.th, NULL);
        im.have_th = false;
    }
    if (at_exit && im.on_exit)
        image_once();
    im.prof = NULL;
}
