/* SPDX-License-Identifier: MIT */
/* Image files: mapped (or read) into memory for mp_img_load() and
 * mp_img_verify(). */
#define _GNU_SOURCE
#include "view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* An image file in memory: mapped read-only (no copy), or read into a
 * buffer when it cannot be mapped. Not MAP_POPULATE: populating walks the
 * file page by page (1.3 ms for 36 MB here), where the faults of the pass,
 * which reads the file front to back, map the page cache's folios a batch
 * at a time (0.3 ms; BENCHMARKS.md). A file
 * truncated by another process while mapped raises SIGBUS, as any mapped
 * file does; mp_img_write() replaces images by rename, never in place. */
struct img_file {
    const unsigned char *data;
    size_t len;
    void *map;
    unsigned char *buf;
};

static void file_close(struct img_file *f)
{
    if (f->map)
        munmap(f->map, f->len);
    free(f->buf);
}

static mp_img_status file_open(const char *path, struct img_file *f, mp_img_error *err)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return img_fail(err, MP_IMG_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        int e = S_ISREG(sb.st_mode) ? errno : EINVAL;
        close(fd);
        return img_fail(err, MP_IMG_E_IO, "cannot read '%s': %s", path,
                        e == EINVAL ? "not a regular file" : strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    if (size > 0) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            close(fd);
            f->map = m;
            f->data = m;
            f->len = size;
            return MP_IMG_OK;
        }
    }
    unsigned char *b = malloc(size ? size : 1);
    if (!b) {
        close(fd);
        return img_fail(err, MP_IMG_E_NOMEM, "out of memory reading '%s'", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, b + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(b);
            close(fd);
            return img_fail(err, MP_IMG_E_IO, "reading '%s': %s", path, strerror(e));
        }
        if (n == 0)
            break; /* shrank under us: the view will say what is missing */
        got += (size_t)n;
    }
    close(fd);
    f->buf = b;
    f->data = b;
    f->len = got;
    return MP_IMG_OK;
}

mp_img_status mp_img_load(mp_img_registry *reg, const char *path, mp_img_heap **out,
                          mp_img_error *err)
{
    if (!out)
        return img_fail(err, MP_IMG_E_ARGUMENT, "output must not be NULL");
    *out = NULL;
    if (!reg || !path)
        return img_fail(err, MP_IMG_E_ARGUMENT, "registry and path must be given");
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    st = mp_img_load_memory(reg, f.data, f.len, out, err);
    file_close(&f);
    return st;
}

mp_img_status mp_img_verify(const char *path, mp_img_error *err)
{
    if (!path)
        return img_fail(err, MP_IMG_E_ARGUMENT, "path must be given");
    struct img_file f;
    mp_img_status st = file_open(path, &f, err);
    if (st != MP_IMG_OK)
        return st;
    struct img_view v;
    st = img_view_open(&v, f.data, f.len, NULL, err);
    if (st == MP_IMG_OK)
        st = img_view_check_objects(&v, err);
    img_view_close(&v);
    file_close(&f);
    return st == MP_IMG_OK ? img_ok(err) : st;
}
