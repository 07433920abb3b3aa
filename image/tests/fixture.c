/* SPDX-License-Identifier: MIT */
/* Shared test fixture (see fixture.h). */
#define _GNU_SOURCE
#include "fixture.h"

#include "checksum.h"
#include "format.h"
#include "internal.h"
#include "map.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long externalise(void *ctx, uintptr_t value, unsigned char *buf, size_t cap)
{
    struct fx *f = ctx;
    f->externalised++;
    if (value >= 1000)
        return -1; /* only small handles have names */
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "handle-%lu", (unsigned long)value);
    memcpy(buf, tmp, (size_t)n < cap ? (size_t)n : cap);
    return n;
}

static bool internalise(void *ctx, const unsigned char *name, size_t len, uintptr_t *value)
{
    struct fx *f = ctx;
    f->internalised++;
    char tmp[32];
    if (len < 8 || len >= sizeof tmp || memcmp(name, "handle-", 7) != 0)
        return false;
    memcpy(tmp, name, len);
    tmp[len] = '\0';
    *value = (uintptr_t)strtoul(tmp + 7, NULL, 10);
    return true;
}

static bool var_shape(void *ctx, const mp_img_word *obj, size_t units, mp_img_shape *out)
{
    (void)ctx;
    if (units == 0 || obj[0] > units - 1)
        return false;
    *out = (mp_img_shape){false, (uint32_t)(obj[0] + 1), 2, MP_IMG_WORD};
    return true;
}

static void reg(struct fx *f, const char *name, mp_img_type_options o, const mp_img_type **t)
{
    mp_img_error err;
    if (mp_img_type_register(f->reg, name, &o, t, &err) != MP_IMG_OK) {
        fprintf(stderr, "fixture: %s: %s\n", name, err.detail);
        abort();
    }
}

void fx_init(struct fx *f, size_t meta)
{
    memset(f, 0, sizeof *f);
    if (mp_img_registry_new(meta, &f->reg, NULL) != MP_IMG_OK)
        abort();
    reg(f, "node", (mp_img_type_options){.spelling = "ref ref"}, &f->node);
    reg(f, "leaf", (mp_img_type_options){.spelling = "word"}, &f->leaf);
    reg(f, "vec", (mp_img_type_options){.spelling = "*: word ref"}, &f->vec);
    reg(f, "str",
        (mp_img_type_options){.spelling = "word bytes", .bytes_length = mp_img_bytes_prev_word},
        &f->str);
    reg(f, "cstr", (mp_img_type_options){.spelling = "bytes", .bytes_length = mp_img_bytes_cstring},
        &f->cstr);
    reg(f, "fn",
        (mp_img_type_options){.spelling = "foreign ref", .foreign = MP_IMG_FOREIGN_RESOLVE},
        &f->fn);
    reg(f, "code",
        (mp_img_type_options){.spelling = "foreign word", .foreign = MP_IMG_FOREIGN_CODE},
        &f->code);
    reg(f, "handle",
        (mp_img_type_options){.spelling = "foreign",
                              .foreign = MP_IMG_FOREIGN_CALLBACKS,
                              .externalise = externalise,
                              .internalise = internalise,
                              .ctx = f},
        &f->handle);
    reg(f, "temp",
        (mp_img_type_options){.spelling = "word foreign", .foreign = MP_IMG_FOREIGN_DROP},
        &f->temp);
    reg(f, "raw", (mp_img_type_options){.spelling = "foreign"}, &f->raw);
    reg(f, "blob", (mp_img_type_options){0}, &f->blob);
    reg(f, "var", (mp_img_type_options){.shape_of = var_shape}, &f->var);
}

void fx_free(struct fx *f)
{
    mp_img_registry_free(f->reg);
    f->reg = NULL;
}

static char tmpdir[4096];
static pid_t tmpdir_owner;

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The directory goes with the process that made it (not with its children). */
static void remove_tmpdir(void)
{
    if (tmpdir[0] && getpid() == tmpdir_owner)
        nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void *fx_list(mp_img_heap *h, const struct fx *f, int n)
{
    void *list = NULL;
    for (int i = 0; i < n; i++) {
        mp_img_word *x = mp_img_alloc(h, f->node, 2);
        if (!x) {
            fprintf(stderr, "fx_list: mp_img_alloc failed\n");
            abort();
        }
        x[1] = (mp_img_word)list;
        list = x;
    }
    return list;
}

const char *fx_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/mpimg-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir))
            abort();
        tmpdir_owner = getpid();
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

char *fx_path(const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", fx_tmpdir(), name) < 0)
        abort();
    return p;
}

unsigned char *fx_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int fx_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(data, 1, len, f);
    return fclose(f) || n != len ? -1 : 0;
}

const char *fx_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "%s is not set (run the tests through meson test)\n", name);
        abort();
    }
    return v;
}

char *fx_run(const char *const *argv, int *status)
{
    int fds[2];
    if (pipe(fds))
        abort();
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    for (;;) {
        if (cap - n < 2) {
            cap *= 2;
            out = realloc(out, cap);
        }
        ssize_t r = read(fds[0], out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = '\0';
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return out;
}

void fx_fix_checksum(unsigned char *img, size_t len)
{
    if (len < sizeof(struct img_header))
        return;
    struct img_header hd;
    memcpy(&hd, img, sizeof hd);
    /* The head checksum first (it is covered by the checksum), over the
     * header and tables as far as the header's sizes say and the bytes go. */
    uint64_t head = sizeof hd, parts[3] = {hd.types_size, hd.foreign_size, hd.roots_size};
    for (int i = 0; i < 3; i++)
        head = parts[i] > len - head ? len : head + parts[i];
    uint64_t sum = img_hash(img + IMG_HEAD_FROM, (size_t)head - IMG_HEAD_FROM);
    memcpy(img + offsetof(struct img_header, head_checksum), &sum, 8);
    sum = img_hash(img + IMG_CHECKSUM_FROM, len - IMG_CHECKSUM_FROM);
    memcpy(img + offsetof(struct img_header, checksum), &sum, 8);
}

/* ---- isomorphism -------------------------------------------------- */

struct iso {
    const mp_img_heap *ha, *hb;
    struct img_map ab, ba;
    const void **queue; /* pairs */
    size_t n, cap;
    char *why;
};

static int pair(struct iso *s, const void *a, const void *b, const char *where)
{
    if (!a || !b) {
        if (a != b)
            snprintf(s->why, 256, "%s: nil on one side only", where);
        return a == b;
    }
    int ins1, ins2;
    uint64_t *x = img_map_put(&s->ab, (uintptr_t)a, 0, (uintptr_t)b, &ins1);
    uint64_t *y = img_map_put(&s->ba, (uintptr_t)b, 0, (uintptr_t)a, &ins2);
    if (*x != (uintptr_t)b || *y != (uintptr_t)a) {
        snprintf(s->why, 256, "%s: identity differs (sharing not preserved)", where);
        return 0;
    }
    if (ins1) {
        if (s->n + 2 > s->cap) {
            s->cap = s->cap ? s->cap * 2 : 256;
            s->queue = realloc(s->queue, s->cap * sizeof *s->queue);
        }
        s->queue[s->n++] = a;
        s->queue[s->n++] = b;
    }
    return 1;
}

static int same_object(struct iso *s, const mp_img_word *a, const mp_img_word *b)
{
    const mp_img_type *ta = mp_img_type_of(s->ha, a), *tb = mp_img_type_of(s->hb, b);
    char where[64];
    snprintf(where, sizeof where, "object of type '%s'", mp_img_type_name(ta));
    if (strcmp(mp_img_type_name(ta), mp_img_type_name(tb)) != 0) {
        snprintf(s->why, 256, "%s vs '%s': types differ", where, mp_img_type_name(tb));
        return 0;
    }
    mp_img_shape sh;
    size_t units = mp_img_units(a);
    if (mp_img_type_shape(ta, &sh) && sh.dynamic)
        units = a[0] + 1;
    else if (!mp_img_type_shape(ta, &sh)) /* the fixture's per-object shape */
        units = a[0] + 1, sh = (mp_img_shape){false, (uint32_t)units, 2, MP_IMG_WORD};
    if (mp_img_units(b) != units || mp_img_flags(a) != mp_img_flags(b)) {
        snprintf(s->why, 256, "%s: unit count or flags differ (%zu/%zu)", where, units,
                 mp_img_units(b));
        return 0;
    }
    size_t w = s->ha->meta_width;
    if (w && memcmp(mp_img_meta(s->ha, (void *)a), mp_img_meta(s->hb, (void *)b), w * 8)) {
        snprintf(s->why, 256, "%s: metadata differs", where);
        return 0;
    }
    for (size_t u = 0; u < units; u++) {
        snprintf(where, sizeof where, "type '%s' unit %zu", mp_img_type_name(ta), u);
        switch (mp_img_shape_kind(&sh, u)) {
        case MP_IMG_REF:
            if (!pair(s, (void *)a[u], (void *)b[u], where))
                return 0;
            break;
        case MP_IMG_WORD:
            if (a[u] != b[u]) {
                snprintf(s->why, 256, "%s: word %lu vs %lu", where, (unsigned long)a[u],
                         (unsigned long)b[u]);
                return 0;
            }
            break;
        case MP_IMG_BYTES: {
            size_t len = strcmp(mp_img_type_name(ta), "cstr") == 0
                             ? (a[u] ? strlen((const char *)a[u]) + 1 : 0)
                             : (size_t)a[u - 1];
            if (!a[u] != !b[u] || (a[u] && memcmp((void *)a[u], (void *)b[u], len))) {
                snprintf(s->why, 256, "%s: bytes differ", where);
                return 0;
            }
            break;
        }
        case MP_IMG_FOREIGN: {
            int dropped = strcmp(mp_img_type_name(ta), "temp") == 0;
            if (b[u] != (dropped ? 0 : a[u])) {
                snprintf(s->why, 256, "%s: foreign 0x%lx vs 0x%lx", where, (unsigned long)a[u],
                         (unsigned long)b[u]);
                return 0;
            }
            break;
        }
        }
    }
    return 1;
}

/* Compares the queued pairs (while `ok`) and frees the comparison. */
static int drain(struct iso *s, int ok)
{
    for (size_t i = 0; ok && i < s->n; i += 2)
        ok = same_object(s, s->queue[i], s->queue[i + 1]);
    img_map_free(&s->ab);
    img_map_free(&s->ba);
    free(s->queue);
    return ok;
}

int fx_iso(const mp_img_heap *ha, const void *a, const mp_img_heap *hb, const void *b,
           char why[256])
{
    struct iso s = {.ha = ha, .hb = hb, .why = why};
    why[0] = '\0';
    int ok = pair(&s, a, b, "root");
    return drain(&s, ok);
}

int fx_iso_roots(const mp_img_heap *ha, const mp_img_heap *hb, char why[256])
{
    if (mp_img_root_count(ha) != mp_img_root_count(hb)) {
        snprintf(why, 256, "root counts differ");
        return 0;
    }
    /* One comparison over all roots, so sharing across roots is checked. */
    struct iso s = {.ha = ha, .hb = hb, .why = why};
    why[0] = '\0';
    int ok = 1;
    for (size_t r = 0; ok && r < mp_img_root_count(ha); r++) {
        void *a, *b;
        const char *na = mp_img_root_at(ha, r, &a), *nb = mp_img_root_at(hb, r, &b);
        if (strcmp(na, nb) != 0) {
            snprintf(why, 256, "root names differ: %s vs %s", na, nb);
            ok = 0;
        } else {
            ok = pair(&s, a, b, na);
        }
    }
    return drain(&s, ok);
}
