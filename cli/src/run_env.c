/* SPDX-License-Identifier: MIT */
/* The environment `mimprof run` hands to the command: LD_PRELOAD and the
 * MIMPROF_* variables of the preload's contract (preload_runtime.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "run.h"

int mpt_run_build_env(const run_opts *o, const char *preload, const char *abs_dir)
{
    const char *old = getenv("LD_PRELOAD");
    char *lp;
    if (old != NULL && old[0] != '\0') {
        if (asprintf(&lp, "%s:%s", preload, old) < 0)
            return -1;
    } else {
        lp = strdup(preload);
        if (lp == NULL)
            return -1;
    }
    int rc = setenv("LD_PRELOAD", lp, 1);
    free(lp);
    char num[64];
    /* With a '/': a directory to the runtime, whatever is there later. */
    char out[PATH_MAX + 1];
    if (abs_dir != NULL && snprintf(out, sizeof out, "%s/", abs_dir) < (int)sizeof out)
        rc |= setenv("MIMPROF_OUTPUT", out, 1);
    else
        unsetenv("MIMPROF_OUTPUT"); /* uploads only */
    if (o->interval != 0) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)o->interval);
        rc |= setenv("MIMPROF_INTERVAL", num, 1);
    } else {
        unsetenv("MIMPROF_INTERVAL");
    }
    snprintf(num, sizeof num, "%llums", (unsigned long long)o->every_ms);
    rc |= setenv("MIMPROF_EVERY", num, 1);
    rc |= setenv("MIMPROF_SYMBOLIZE", o->symbolize, 1);
    if (o->seed != NULL)
        rc |= setenv("MIMPROF_SEED", o->seed, 1);
    if (o->max_depth != NULL)
        rc |= setenv("MIMPROF_STACK_DEPTH", o->max_depth, 1);
    if (o->drop_frames != NULL)
        rc |= setenv("MIMPROF_DROP_FRAMES", o->drop_frames, 1);
    if (o->keep_alloc_frames)
        rc |= setenv("MIMPROF_KEEP_ALLOC_FRAMES", "1", 1);
    rc |= setenv("MIMPROF_FOLLOW_FORK", o->follow_fork == 0 ? "0" : "1", 1);
    rc |= setenv("MIMPROF_FOLLOW_EXEC", o->follow_exec == 1 ? "1" : "0", 1);
    if (o->quiet)
        rc |= setenv("MIMPROF_QUIET", "1", 1);
    if (o->dormant)
        rc |= setenv("MIMPROF_DORMANT", "1", 1);
    if (o->http != NULL)
        rc |= setenv("MIMPROF_HTTP", o->http, 1);
    if (o->http_wildcard)
        rc |= setenv("MIMPROF_HTTP_WILDCARD", "1", 1);
    if (o->report_above != NULL)
        rc |= setenv("MIMPROF_REPORT_ABOVE", o->report_above, 1);
    return rc == 0 ? 0 : -1;
}

/* --image-*: MIMPROF_IMAGE (absolute, created), MIMPROF_IMAGE_EVERY and
 * MIMPROF_IMAGE_ON_EXIT; without them the environment's MIMPROF_IMAGE, if
 * any, passes through (SIGUSR2 images). */
int mpt_run_image_env(const run_opts *o)
{
    if (!o->image_on_exit && o->image_every == NULL && o->image_dir == NULL)
        return 0;
    const char *dir = o->image_dir != NULL ? o->image_dir : o->out_dir;
    char abs[PATH_MAX];
    if (mpt_mkdir_dir(dir) != 0 || realpath(dir, abs) == NULL || mpt_dir_writable(abs) != 0) {
        fprintf(stderr, "mimprof run: cannot use image directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = setenv("MIMPROF_IMAGE", abs, 1);
    if (o->image_every != NULL)
        rc |= setenv("MIMPROF_IMAGE_EVERY", o->image_every, 1);
    else
        unsetenv("MIMPROF_IMAGE_EVERY");
    rc |= setenv("MIMPROF_IMAGE_ON_EXIT", o->image_on_exit ? "1" : "0", 1);
    if (rc != 0)
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
    return rc == 0 ? 0 : -1;
}
