/* SPDX-License-Identifier: MIT */
/* Finds the objects `mimprof run` loads: the preload object for the
 * command and libmimprof-pyroscope for uploads (run.h). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

#ifndef MPT_PRELOAD_BUILD_REL
#define MPT_PRELOAD_BUILD_REL "../preload"
#endif
#ifndef MPT_PRELOAD_INSTALL_REL
#define MPT_PRELOAD_INSTALL_REL "../lib"
#endif
/* The workspace build tree's libmimprof-pyroscope, relative to this
 * executable's directory ("" outside the workspace). */
#ifndef MPT_PYROSCOPE_BUILD_REL
#define MPT_PYROSCOPE_BUILD_REL ""
#endif

/* The directory of this executable into exe[PATH_MAX]; false if unknown. */
static bool exe_dir(char *exe)
{
    ssize_t n = readlink("/proc/self/exe", exe, PATH_MAX - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';
    return true;
}

/* Appends the i-th directory looked in to looked[cap] at *off. */
static void looked_add(char *looked, size_t cap, size_t *off, int i, const char *dir)
{
    int w = snprintf(looked + *off, cap - *off, "%s%.1000s", i ? ", " : "", dir);
    if (w > 0 && (size_t)w < cap - *off)
        *off += (size_t)w;
}

int mpt_run_find_preload(const char *object, char *out, size_t outlen, char *looked,
                         size_t lookedlen)
{
    char exe[PATH_MAX];
    char dirs[3][PATH_MAX];
    int nd = 0;
    const char *env = getenv("MIMPROF_PRELOAD_DIR");
    if (env != NULL && env[0] != '\0')
        snprintf(dirs[nd++], PATH_MAX, "%s", env);
    if (exe_dir(exe)) {
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_BUILD_REL);
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_INSTALL_REL);
    }
    size_t off = 0;
    looked[0] = '\0';
    for (int i = 0; i < nd; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%.3900s/libmimprof-preload-%.32s.so", dirs[i], object);
        if (access(cand, R_OK) == 0 && realpath(cand, out) != NULL && strlen(out) < outlen)
            return 0;
        looked_add(looked, lookedlen, &off, i, dirs[i]);
    }
    return -1;
}

#if MPT_HAVE_PYROSCOPE
int mpt_run_find_pyroscope(const char *preload, mpt_pyro_api *api, char *looked, size_t lookedlen,
                           char *err, size_t errlen)
{
    err[0] = looked[0] = '\0';
    const char *env = getenv("MIMPROF_PYROSCOPE_LIB");
    if (env != NULL && env[0] != '\0') {
        snprintf(looked, lookedlen, "MIMPROF_PYROSCOPE_LIB=%s", env);
        return mpt_pyro_open(env, true, api, err, errlen) ? 0 : -1;
    }
    char dirs[3][PATH_MAX];
    int nd = 0;
    const char *slash = strrchr(preload, '/');
    if (slash != NULL)
        snprintf(dirs[nd++], PATH_MAX, "%.*s", (int)(slash - preload), preload);
    char exe[PATH_MAX];
    if (exe_dir(exe)) {
        if (MPT_PYROSCOPE_BUILD_REL[0] != '\0')
            snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PYROSCOPE_BUILD_REL);
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_INSTALL_REL);
    }
    size_t off = 0;
    char e[1024];
    for (int i = 0; i < nd; i++) {
        static const char *const names[] = {MPT_PYRO_SONAME, MPT_PYRO_DEVNAME};
        for (int k = 0; k < 2; k++) {
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%.4000s/%s", dirs[i], names[k]);
            if (access(cand, R_OK) != 0)
                continue;
            if (mpt_pyro_open(cand, true, api, e, sizeof e))
                return 0;
            if (err[0] == '\0')
                snprintf(err, errlen, "%s", e);
            break;
        }
        looked_add(looked, lookedlen, &off, i, dirs[i]);
    }
    if (mpt_pyro_open(MPT_PYRO_SONAME, true, api, e, sizeof e))
        return 0;
    snprintf(looked + off, lookedlen - off, "%sthe dynamic loader's path", nd ? ", " : "");
    return -1;
}
#endif
