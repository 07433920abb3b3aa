/* SPDX-License-Identifier: MIT */
/* `mimprof run` without --allocator: the allocator the command links.
 *
 * A program linked with jemalloc (Debian's redis-server, through its
 * DT_NEEDED libjemalloc.so.2) calls jemalloc's own interface besides
 * malloc (mallctl for its INFO and MEMORY figures, or mallocx); profiled
 * over the mimalloc preload its malloc goes to mimalloc while those calls
 * still ask jemalloc, which then reports an almost empty heap (redis:
 * used_memory ~28 KB, a false "High process RSS overhead" from MEMORY
 * DOCTOR). So the command's executable and the objects it needs, found as
 * the dynamic loader would look for them (its RUNPATH or RPATH with
 * $ORIGIN, LD_LIBRARY_PATH, the system's library directories), are read
 * for a DT_NEEDED libjemalloc; when one names it, the jemalloc preload is
 * used, and one line says so. Scripts and static programs link nothing:
 * mimalloc, silently, as before. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_needed.h"
#include "run.h"

/* Objects read at most (a program's closure is a few dozen). */
#define MAX_OBJECTS 128

/* Where the dynamic loader looks after the object's own path and
 * LD_LIBRARY_PATH: the multiarch and plain system directories. */
static const char *const SYSTEM_DIRS[] = {
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
};

static ssize_t file_read(void *ctx, void *buf, size_t n, uint64_t off)
{
    return pread(*(int *)ctx, buf, n, (off_t)off);
}

static bool read_dyn(const char *path, mpt_elf_dyn *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = mpt_elf_needed(file_read, &fd, out);
    close(fd);
    return ok;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The command as execvp() finds it, into out[PATH_MAX]. */
static bool find_command(const char *cmd, char *out)
{
    if (strchr(cmd, '/') != NULL)
        return realpath(cmd, out) != NULL;
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchrnul(p, ':');
        char cand[PATH_MAX];
        int n = end == p ? snprintf(cand, sizeof cand, "./%s", cmd)
                         : snprintf(cand, sizeof cand, "%.*s/%s", (int)(end - p), p, cmd);
        if (n > 0 && (size_t)n < sizeof cand && is_file(cand) && access(cand, X_OK) == 0 &&
            realpath(cand, out) != NULL)
            return true;
        if (*end == '\0')
            return false;
        p = end + 1;
    }
}

/* Looks for `name` in the ':'-separated `dirs` ($ORIGIN: `origin`). */
static bool find_in(const char *dirs, const char *origin, const char *name, char *out)
{
    for (const char *p = dirs; p != NULL && *p != '\0';) {
        const char *end = strchrnul(p, ':');
        char dir[PATH_MAX];
        int n;
        if (strncmp(p, "$ORIGIN", 7) == 0)
            n = snprintf(dir, sizeof dir, "%s%.*s", origin, (int)(end - p - 7), p + 7);
        else if (strncmp(p, "${ORIGIN}", 9) == 0)
            n = snprintf(dir, sizeof dir, "%s%.*s", origin, (int)(end - p - 9), p + 9);
        else
            n = snprintf(dir, sizeof dir, "%.*s", (int)(end - p), p);
        char cand[PATH_MAX + 256];
        if (n > 0 && (size_t)n < sizeof dir &&
            snprintf(cand, sizeof cand, "%s/%s", dir, name) < (int)sizeof cand && is_file(cand) &&
            realpath(cand, out) != NULL)
            return true;
        p = *end == '\0' ? NULL : end + 1;
    }
    return false;
}

/* The object `name` needed by an object in directory `origin` with search
 * path `runpath`, into out[PATH_MAX]. */
static bool find_lib(const char *name, const char *origin, const char *runpath, char *out)
{
    if (strchr(name, '/') != NULL)
        return realpath(name, out) != NULL;
    if (find_in(runpath, origin, name, out) ||
        find_in(getenv("LD_LIBRARY_PATH"), origin, name, out))
        return true;
    for (size_t i = 0; i < sizeof SYSTEM_DIRS / sizeof SYSTEM_DIRS[0]; i++)
        if (find_in(SYSTEM_DIRS[i], origin, name, out))
            return true;
    return false;
}

bool mpt_run_links_jemalloc(const char *cmd, char *lib, size_t liblen)
{
    static char queue[MAX_OBJECTS][PATH_MAX];
    unsigned n = 0;
    if (!find_command(cmd, queue[n]))
        return false;
    n++;
    for (unsigned i = 0; i < n; i++) {
        mpt_elf_dyn dyn;
        if (!read_dyn(queue[i], &dyn))
            continue;
        char origin[PATH_MAX];
        snprintf(origin, sizeof origin, "%s", queue[i]);
        char *slash = strrchr(origin, '/');
        if (slash != NULL)
            *slash = '\0';
        for (unsigned k = 0; k < dyn.nneeded; k++) {
            const char *base = strrchr(dyn.needed[k], '/');
            base = base != NULL ? base + 1 : dyn.needed[k];
            if (strncmp(base, "libjemalloc", 11) == 0) {
                snprintf(lib, liblen, "%s", base);
                return true;
            }
            char path[PATH_MAX];
            if (n == MAX_OBJECTS || !find_lib(dyn.needed[k], origin, dyn.runpath, path))
                continue;
            bool seen = false;
            for (unsigned j = 0; j < n && !seen; j++)
                seen = strcmp(queue[j], path) == 0;
            if (!seen)
                memcpy(queue[n++], path, sizeof path);
        }
    }
    return false;
}

void mpt_run_pick_allocator(run_opts *o, const char *cmd)
{
    char lib[128];
    if (o->allocator_given || !mpt_run_links_jemalloc(cmd, lib, sizeof lib))
        return;
    char object[64], preload[PATH_MAX], looked[4096];
    snprintf(object, sizeof object, "jemalloc%s", o->dormant ? "-dormant" : "");
    const char *base = strrchr(cmd, '/') != NULL ? strrchr(cmd, '/') + 1 : cmd;
    if (mpt_run_find_preload(object, preload, sizeof preload, looked, sizeof looked) != 0) {
        if (!o->quiet)
            fprintf(stderr,
                    "mimprof: %s links %s, but this mimprof has no jemalloc preload object: "
                    "profiling over mimalloc (jemalloc's own statistics will not see its heap)\n",
                    base, lib);
        return;
    }
    o->allocator = "jemalloc";
    if (!o->quiet)
        fprintf(stderr,
                "mimprof: %s links %s: profiling over jemalloc (--allocator mimalloc to choose "
                "otherwise)\n",
                base, lib);
}
