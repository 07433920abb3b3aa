/* SPDX-License-Identifier: MIT */
/* The spool: one file per undeliverable profile in a directory owned by
 * one agent at a time (flock on .lock). File names sort by the profile's
 * start time, the timestamp Pyroscope measures a profile's age from:
 * p-<from_ns:20>-<pid:10>-<seq:6>.mpspool. The content's format, and
 * which files are this agent's, is spool_file.c's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/random.h>

#include <mimprof/profiling.h>

#include "labels.h"
#include "owner.h"
#include "queue.h"
#include "spool_file.h"
#include "util.h"

typedef struct spool_file {
    char *name;
    uint64_t size;
    int64_t ts_ns; /* from the name: the profile's start (its end in version 1) */
    bool foreign;  /* meant for another server, tenant or credentials: never sent */
} spool_file;

struct mp_pyro_spool {
    pthread_mutex_t mu;
    char *dir;
    int lock_fd;
    uint64_t max_bytes;
    int64_t max_age_ns;
    const mp_pyro_config *owner; /* the agent's: what its files are compared with */
    spool_file *files;           /* sorted by name = by ts_ns */
    size_t nfiles, cap, nforeign;
    uint64_t bytes;
    unsigned seq;
};

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const spool_file *)a)->name, ((const spool_file *)b)->name);
}

static char *path_of(const mp_pyro_spool *sp, const char *name)
{
    char *p = NULL;
    return asprintf(&p, "%s/%s", sp->dir, name) < 0 ? NULL : p;
}

static int parse_name(const char *name, int64_t *ts)
{
    long long u;
    int n = 0;
    if (sscanf(name, "p-%20lld-%*d-%*u.mpspool%n", &u, &n) != 1 || n == 0 || name[n] != '\0')
        return -1;
    *ts = u;
    return 0;
}

static int add_file(mp_pyro_spool *sp, const char *name, uint64_t size, int64_t ts, bool foreign)
{
    if (sp->nfiles == sp->cap) {
        size_t cap = sp->cap ? sp->cap * 2 : 16;
        spool_file *f = realloc(sp->files, cap * sizeof *f);
        if (!f)
            return -1;
        sp->files = f;
        sp->cap = cap;
    }
    char *d = strdup(name);
    if (!d)
        return -1;
    sp->files[sp->nfiles++] = (spool_file){d, size, ts, foreign};
    sp->bytes += size;
    sp->nforeign += foreign;
    return 0;
}

/* Removes files[i] from disk and from the index. */
static void drop_index(mp_pyro_spool *sp, size_t i)
{
    char *p = path_of(sp, sp->files[i].name);
    if (p)
        unlink(p);
    free(p);
    sp->bytes -= sp->files[i].size;
    sp->nforeign -= sp->files[i].foreign;
    free(sp->files[i].name);
    memmove(&sp->files[i], &sp->files[i + 1], (sp->nfiles - i - 1) * sizeof sp->files[0]);
    sp->nfiles--;
}

static bool is_foreign(const mp_pyro_spool *sp, const char *name);

mp_pyro_status mp_pyro_spool_open(const char *dir, uint64_t max_bytes, uint32_t max_age_s,
                                  const mp_pyro_config *owner, mp_pyro_spool **out, char *err,
                                  size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        mp_pyro_fmt(err, errlen, "spool directory '%s': %s", dir, strerror(errno));
        return MP_PYRO_E_IO;
    }
    /* Everything below is relative to the directory opened once: a path
     * that names something else (a file, a FIFO, a device) is refused,
     * and nothing in it is followed out of it. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        mp_pyro_fmt(err, errlen, "spool directory '%s': %s", dir,
                    errno == ENOTDIR ? "not a directory" : strerror(errno));
        return MP_PYRO_E_IO;
    }
    mp_pyro_spool *sp = calloc(1, sizeof *sp);
    if (!sp || !(sp->dir = strdup(dir))) {
        free(sp);
        close(dfd);
        return MP_PYRO_E_NOMEM;
    }
    pthread_mutex_init(&sp->mu, NULL);
    sp->max_bytes = max_bytes;
    sp->max_age_ns = (int64_t)max_age_s * 1000000000;
    sp->owner = owner;
    /* O_NOFOLLOW: a symbolic link named .lock is refused, never created
     * or locked where it points. */
    sp->lock_fd =
        mp_prof_fd_high(openat(dfd, ".lock", O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600));
    mp_pyro_status st = MP_PYRO_OK;
    if (sp->lock_fd < 0) {
        mp_pyro_fmt(err, errlen, "spool directory '%s': cannot create .lock: %s", dir,
                    errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        st = MP_PYRO_E_IO;
    } else if (flock(sp->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        mp_pyro_fmt(err, errlen, "spool directory '%s' is in use by another agent", dir);
        st = errno == EWOULDBLOCK ? MP_PYRO_E_SPOOL_LOCKED : MP_PYRO_E_IO;
    }
    DIR *d = st == MP_PYRO_OK ? opendir(dir) : NULL;
    if (st == MP_PYRO_OK && !d) {
        mp_pyro_fmt(err, errlen, "spool directory '%s': %s", dir, strerror(errno));
        st = MP_PYRO_E_IO;
    }
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int64_t ts;
        struct stat sb;
        /* Only regular files are ours: a FIFO would block the read, a
         * link would lead to (and later delete) a file elsewhere. */
        if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            unlinkat(dfd, de->d_name, 0); /* left by a crash between write and rename */
            continue;
        }
        if (parse_name(de->d_name, &ts) != 0)
            continue;
        char *p = path_of(sp, de->d_name);
        if (p && add_file(sp, de->d_name, (uint64_t)sb.st_size, ts, is_foreign(sp, p)) != 0)
            st = MP_PYRO_E_NOMEM;
        free(p);
    }
    if (d)
        closedir(d);
    close(dfd);
    if (st != MP_PYRO_OK) {
        mp_pyro_spool_close(sp);
        return st;
    }
    if (sp->nfiles)
        qsort(sp->files, sp->nfiles, sizeof *sp->files, cmp_file);
    *out = sp;
    return MP_PYRO_OK;
}

void mp_pyro_spool_close(mp_pyro_spool *sp)
{
    if (!sp)
        return;
    for (size_t i = 0; i < sp->nfiles; i++)
        free(sp->files[i].name);
    free(sp->files);
    if (sp->lock_fd >= 0)
        close(sp->lock_fd);
    pthread_mutex_destroy(&sp->mu);
    free(sp->dir);
    free(sp);
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7F)
            *s = '_';
}

mp_pyro_status mp_pyro_spool_put(mp_pyro_spool *sp, const mp_pyro_series *series, const char *spy,
                                 const mp_pyro_item *it, uint64_t *evicted, char *err,
                                 size_t errlen)
{
    *evicted = 0;
    mp_pyro_buf h = {0};
    char *spy_clean = strdup(spy ? spy : "");
    if (!spy_clean)
        return MP_PYRO_E_NOMEM;
    sanitize(spy_clean);
    uint8_t salt[MP_PYRO_SALT_LEN];
    if (getrandom(salt, sizeof salt, 0) != (ssize_t)sizeof salt) {
        free(spy_clean);
        mp_pyro_fmt(err, errlen, "spool: no random bytes for the owner's salt: %s",
                    strerror(errno));
        return MP_PYRO_E_IO;
    }
    mp_pyro_spool_header(sp->owner, salt, series, spy_clean, it->from_ns, it->until_ns, it->gz_len,
                         &h);
    free(spy_clean);
    if (h.oom) {
        mp_pyro_buf_free(&h);
        return MP_PYRO_E_NOMEM;
    }
    uint64_t size = h.len + it->gz_len;
    pthread_mutex_lock(&sp->mu);
    mp_pyro_status st = MP_PYRO_OK;
    char name[80], tmp[96];
    char *path = NULL, *tpath = NULL;
    if (size > sp->max_bytes) {
        mp_pyro_fmt(err, errlen, "profile of %llu bytes exceeds the spool bound of %llu bytes",
                    (unsigned long long)size, (unsigned long long)sp->max_bytes);
        st = MP_PYRO_E_IO;
        goto out;
    }
    while (sp->nfiles && sp->bytes + size > sp->max_bytes) {
        drop_index(sp, 0);
        (*evicted)++;
    }
    snprintf(name, sizeof name, "p-%020" PRId64 "-%010d-%06u.mpspool", it->from_ns, (int)getpid(),
             sp->seq++ % 1000000);
    snprintf(tmp, sizeof tmp, ".tmp-%s", name);
    path = path_of(sp, name);
    tpath = path_of(sp, tmp);
    if (!path || !tpath) {
        st = MP_PYRO_E_NOMEM;
        goto out;
    }
    int fd = open(tpath, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) {
        mp_pyro_fmt(err, errlen, "spool file '%s': %s", tpath, strerror(errno));
        st = MP_PYRO_E_IO;
        goto out;
    }
    ssize_t w1 = write(fd, h.data, h.len);
    ssize_t w2 = it->gz_len ? write(fd, it->gz, it->gz_len) : 0;
    int bad = w1 != (ssize_t)h.len || w2 != (ssize_t)it->gz_len || fsync(fd) != 0;
    int e = errno;
    close(fd);
    if (bad || rename(tpath, path) != 0) {
        mp_pyro_fmt(err, errlen, "spool file '%s': %s", path, strerror(bad ? e : errno));
        unlink(tpath);
        st = MP_PYRO_E_IO;
        goto out;
    }
    if (add_file(sp, name, size, it->from_ns, false) != 0) {
        unlink(path);
        st = MP_PYRO_E_NOMEM;
        goto out;
    }
    qsort(sp->files, sp->nfiles, sizeof *sp->files, cmp_file);
out:
    pthread_mutex_unlock(&sp->mu);
    free(path);
    free(tpath);
    mp_pyro_buf_free(&h);
    return st;
}

static bool is_foreign(const mp_pyro_spool *sp, const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_pyro_spool_entry e = {0};
    /* unreadable files are left to peek, which deletes and counts them */
    bool foreign = mp_pyro_read_file(path, &buf, &len) == 0 &&
                   mp_pyro_spool_parse(sp->owner, buf, len, &e) == 1;
    mp_pyro_spool_entry_free(&e);
    free(buf);
    return foreign;
}

mp_pyro_status mp_pyro_spool_peek(mp_pyro_spool *sp, mp_pyro_spool_entry *e, uint64_t *expired,
                                  uint64_t *corrupt)
{
    memset(e, 0, sizeof *e);
    *expired = *corrupt = 0;
    pthread_mutex_lock(&sp->mu);
    int64_t now = mp_pyro_now_real_ns();
    mp_pyro_status st = MP_PYRO_OK;
    size_t i = 0;
    while (i < sp->nfiles) {
        /* the server's rule: the profile's timestamp (its start) older than
         * the bound is refused; foreign files expire the same way */
        if (sp->files[i].ts_ns < now - sp->max_age_ns) {
            drop_index(sp, i);
            (*expired)++;
            continue;
        }
        if (sp->files[i].foreign) {
            i++;
            continue;
        }
        char *path = path_of(sp, sp->files[i].name);
        if (!path) {
            st = MP_PYRO_E_NOMEM;
            break;
        }
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = mp_pyro_read_file(path, &buf, &len) != 0
                     ? -1
                     : mp_pyro_spool_parse(sp->owner, buf, len, e);
        free(buf);
        if (rc != 0) {
            free(path);
            mp_pyro_spool_entry_free(e);
            if (rc > 0) { /* replaced by another owner's file since the index was made */
                sp->files[i].foreign = true;
                sp->nforeign++;
                i++;
                continue;
            }
            drop_index(sp, i);
            (*corrupt)++;
            continue;
        }
        e->path = path;
        break;
    }
    pthread_mutex_unlock(&sp->mu);
    return st;
}

void mp_pyro_spool_remove(mp_pyro_spool *sp, const mp_pyro_spool_entry *e)
{
    if (!e->path)
        return;
    pthread_mutex_lock(&sp->mu);
    const char *base = strrchr(e->path, '/');
    base = base ? base + 1 : e->path;
    for (size_t i = 0; i < sp->nfiles; i++) {
        if (strcmp(sp->files[i].name, base) == 0) {
            drop_index(sp, i);
            break;
        }
    }
    pthread_mutex_unlock(&sp->mu);
}

void mp_pyro_spool_entry_free(mp_pyro_spool_entry *e)
{
    free(e->path);
    mp_pyro_series_clear(&e->series);
    free(e->spy);
    free(e->gz);
    memset(e, 0, sizeof *e);
}

void mp_pyro_spool_counts(mp_pyro_spool *sp, uint64_t *files, uint64_t *bytes, uint64_t *foreign)
{
    pthread_mutex_lock(&sp->mu);
    *files = sp->nfiles;
    *bytes = sp->bytes;
    *foreign = sp->nforeign;
    pthread_mutex_unlock(&sp->mu);
}
