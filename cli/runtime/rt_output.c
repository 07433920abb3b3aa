/* SPDX-License-Identifier: MIT */
/* Report names and atomic, non-destructive writes (rt_output.h). */
#define _GNU_SOURCE
#include "rt_output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <mimprof/profiling.h>

#include "fsutil.h"

/* The reason into why; errno is kept (a caller tells a full disk). */
static int fail(char *why, size_t whylen, const char *fmt, const char *a, const char *b)
{
    int e = errno;
    snprintf(why, whylen, fmt, a, b);
    errno = e;
    return -1;
}

/* The pattern with %p, %n, %t and %% expanded. */
static int expand(const char *pat, pid_t pid, unsigned seq, char *dst, size_t cap)
{
    size_t o = 0;
    for (const char *s = pat; *s; s++) {
        char piece[32] = {s[0], 0};
        if (s[0] == '%' && s[1] != '\0') {
            s++;
            if (*s == 'p')
                snprintf(piece, sizeof piece, "%ld", (long)pid);
            else if (*s == 'n')
                snprintf(piece, sizeof piece, "%u", seq);
            else if (*s == 't')
                snprintf(piece, sizeof piece, "%lld", (long long)time(NULL));
            else if (*s == '%')
                piece[0] = '%';
            else {
                piece[0] = '%';
                piece[1] = *s;
            }
        }
        size_t l = strlen(piece);
        if (o + l >= cap)
            return -1;
        memcpy(dst + o, piece, l);
        o += l;
    }
    dst[o] = '\0';
    return 0;
}

int mpt_out_name(const mpt_out *o, pid_t pid, unsigned seq, char *dst, size_t cap)
{
    return expand(o->pattern, pid, seq, dst, cap);
}

int mpt_out_target(const char *path, char *real, size_t cap, char *why, size_t whylen)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return fail(why, whylen, "cannot write %s: %s", path, strerror(errno));
        return snprintf(real, cap, "%s", path) < (int)cap ? 0 : -1;
    }
    if (S_ISLNK(st.st_mode)) {
        /* Followed: the file it names (which may not exist yet). */
        char buf[PATH_MAX];
        if (realpath(path, buf) == NULL) {
            if (errno != ENOENT)
                return fail(why, whylen, "cannot write %s: %s", path, strerror(errno));
            ssize_t n = readlink(path, buf, sizeof buf - 1);
            if (n <= 0 || buf[0] != '/')
                return fail(why, whylen, "%s is a symbolic link to a missing relative target%s",
                            path, "");
            buf[n] = '\0';
        } else if (stat(buf, &st) == 0 && !S_ISREG(st.st_mode)) {
            return fail(why, whylen, "%s is not a regular file (a symbolic link to %s)", path, buf);
        }
        return snprintf(real, cap, "%s", buf) < (int)cap ? 0 : -1;
    }
    if (!S_ISREG(st.st_mode))
        return fail(why, whylen, "%s is not a regular file%s", path, "");
    return snprintf(real, cap, "%s", path) < (int)cap ? 0 : -1;
}

int mpt_out_configure(mpt_out *o, const char *value, const char *dflt, const char *dir_name,
                      char *why, size_t whylen)
{
    const char *v = value != NULL && value[0] != '\0' ? value : dflt;
    char abs[4096], cwd[4096];
    int n = v[0] == '/'                       ? snprintf(abs, sizeof abs, "%s", v)
            : getcwd(cwd, sizeof cwd) != NULL ? snprintf(abs, sizeof abs, "%s/%s", cwd, v)
                                              : -1;
    if (n < 0 || (size_t)n >= sizeof abs)
        return fail(why, whylen, "MIMPROF_OUTPUT=%s is too long%s", v, "");
    size_t len = (size_t)n;
    struct stat st;
    bool dir = abs[len - 1] == '/' || (stat(abs, &st) == 0 && S_ISDIR(st.st_mode));
    memset(o, 0, sizeof *o);
    if (dir) {
        while (len > 1 && abs[len - 1] == '/')
            abs[--len] = '\0';
        if (mpt_mkdir_dir(abs) != 0)
            return fail(why, whylen, "cannot create the directory %s: %s", abs, strerror(errno));
        /* Writable: what the reports will need, tried now. */
        if (mpt_dir_writable(abs) != 0)
            return fail(why, whylen, "cannot write in %s: %s", abs, strerror(errno));
        memcpy(o->dir, abs, len + 1);
        if (snprintf(o->pattern, sizeof o->pattern, "%s/%s", abs, dir_name) >=
            (int)sizeof o->pattern)
            return fail(why, whylen, "MIMPROF_OUTPUT=%s is too long%s", v, "");
    } else {
        memcpy(o->pattern, abs, len + 1);
        if (strchr(abs, '%') == NULL) {
            char real[4096];
            if (mpt_out_target(abs, real, sizeof real, why, whylen) != 0)
                return -1;
        }
    }
    size_t plen = strlen(o->pattern);
    o->gzip = plen > 3 && strcmp(o->pattern + plen - 3, ".gz") == 0;
    o->per_process = strstr(o->pattern, "%p") != NULL;
    return 0;
}

/* ---- writing ---------------------------------------------------------- */

/* zlib's allocator: mmap, so the writer's buffers never pass through the
 * malloc the profiler samples. A size header precedes each block. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    size_t n = (size_t)items * size + 16;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return Z_NULL;
    *(size_t *)p = n;
    return (char *)p + 16;
}

static void z_free(voidpf opaque, voidpf address)
{
    (void)opaque;
    if (address != Z_NULL) {
        char *p = (char *)address - 16;
        munmap(p, *(size_t *)p);
    }
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* gzip-compresses buf into fd. */
static int gzip_to_fd(int fd, const uint8_t *buf, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    enum { CHUNK = 1 << 18 };
    uint8_t *out = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (out == MAP_FAILED) {
        deflateEnd(&zs);
        return -1;
    }
    int rc = 0, z;
    size_t off = 0;
    do {
        if (zs.avail_in == 0 && off < len) {
            size_t chunk = len - off > (1u << 30) ? (1u << 30) : len - off;
            zs.next_in = (Bytef *)(uintptr_t)(buf + off);
            zs.avail_in = (uInt)chunk;
            off += chunk;
        }
        zs.next_out = out;
        zs.avail_out = CHUNK;
        z = deflate(&zs, off == len ? Z_FINISH : Z_NO_FLUSH);
        if (z == Z_STREAM_ERROR) {
            errno = EIO;
            rc = -1;
            break;
        }
        if (write_all(fd, out, CHUNK - zs.avail_out) != 0) {
            rc = -1;
            break;
        }
    } while (z != Z_STREAM_END);
    int e = errno;
    deflateEnd(&zs);
    munmap(out, CHUNK);
    errno = e;
    return rc;
}

int mpt_out_write(const char *path, const uint8_t *buf, size_t len, bool gzip, char *why,
                  size_t whylen)
{
    char real[4096], tmp[4200];
    if (mpt_out_target(path, real, sizeof real, why, whylen) != 0)
        return -1;
    const char *slash = strrchr(real, '/');
    int dlen = slash != NULL ? (int)(slash - real) : 0;
    if (slash != NULL && dlen > 0) {
        /* A pattern's directories may not exist yet (%p in a directory
         * name): created as a directory output is. */
        char d[4096];
        snprintf(d, sizeof d, "%.*s", dlen, real);
        if (mpt_mkdir_dir(d) != 0)
            return fail(why, whylen, "cannot write %s: %s", path, strerror(errno));
    }
    /* Next to the target (same file system, so rename is atomic), unique
     * to this process. A stale one of a dead process with this pid goes. */
    snprintf(tmp, sizeof tmp, "%.*s/.%s.%ld.tmp", dlen, real, slash != NULL ? slash + 1 : real,
             (long)getpid());
    /* Out of the program's numbers, also when it holds all of them. */
    int fd = mp_prof_fd_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = mp_prof_fd_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd < 0)
        return fail(why, whylen, "cannot write %s: %s", path, strerror(errno));
    int rc = gzip ? gzip_to_fd(fd, buf, len) : write_all(fd, buf, len);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    /* The target may have changed since it was checked: checked again
     * just before the rename, which never replaces a non-regular file. */
    if (rc == 0 && mpt_out_target(path, real, sizeof real, why, whylen) != 0) {
        unlink(tmp);
        return -1;
    }
    if (rc == 0 && rename(tmp, real) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        errno = e;
        return fail(why, whylen, "cannot write %s: %s", path, strerror(e));
    }
    return 0;
}
