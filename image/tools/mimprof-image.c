/* SPDX-License-Identifier: MIT */
/* mimprof-image info|verify|census FILE: what an image holds and whether it
 * is sound, without the program that wrote it (no registry needed).
 * Exit status: 0 sound, 1 refused, 2 usage or I/O error. */
#define _GNU_SOURCE
#include "view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int usage(void)
{
    fputs("usage: mimprof-image info|verify|census FILE\n"
          "  info    header fields, counts, roots and the verification result\n"
          "  verify  full verification; exit 0 if sound, 1 if refused\n"
          "  census  objects and units per type, and the foreign table\n",
          stderr);
    return 2;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static void put_text(const char *label, const char field[IMG_TEXT_FIELD], const char *mine)
{
    char t[IMG_TEXT_FIELD];
    img_text_field(field, t);
    printf("%-16s %s%s%s%s\n", label, t, strcmp(t, mine) ? " (this process: " : "",
           strcmp(t, mine) ? mine : "", strcmp(t, mine) ? ")" : "");
}

static void print_header(const struct img_header *hd, size_t len)
{
    char release[IMG_TEXT_FIELD], os[IMG_TEXT_FIELD], arch[IMG_TEXT_FIELD];
    img_platform(release, os, arch);
    printf("%-16s %zu bytes\n", "size", len);
    printf("%-16s %u\n", "format version", (unsigned)hd->version);
    printf("%-16s %s\n", "byte order",
           hd->byte_order == IMG_BYTE_ORDER           ? "native"
           : hd->byte_order == IMG_BYTE_ORDER_SWAPPED ? "swapped"
                                                      : "invalid");
    printf("%-16s %u\n", "word size", (unsigned)hd->word_size);
    put_text("release", hd->release, release);
    put_text("os", hd->os, os);
    put_text("arch", hd->arch, arch);
    printf("%-16s %u\n", "metadata width", (unsigned)hd->meta_width);
    printf("%-16s 0x%016llx\n", "type digest", (unsigned long long)hd->type_digest);
    printf("%-16s %s\n", "incomplete", hd->incomplete ? "yes" : "no");
    printf("%-16s 0x%016llx\n", "checksum", (unsigned long long)hd->checksum);
    printf("%-16s 0x%016llx\n", "head checksum", (unsigned long long)hd->head_checksum);
    printf("%-16s %llu\n", "types", (unsigned long long)hd->n_types);
    printf("%-16s %llu\n", "foreign entries", (unsigned long long)hd->n_foreign);
    printf("%-16s %llu\n", "roots", (unsigned long long)hd->n_roots);
    printf("%-16s %llu\n", "objects", (unsigned long long)hd->n_objects);
    printf("%-16s %llu bytes\n", "byte blob", (unsigned long long)hd->n_bytes);
}

static void print_str(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' && s[i] != '"')
            putchar(s[i]);
        else
            printf("\\x%02x", s[i]);
}

static void print_foreign(const struct img_view *v)
{
    printf("foreign table (%llu entries)\n", (unsigned long long)v->hd.n_foreign);
    for (uint64_t k = 0; k < v->hd.n_foreign; k++) {
        const struct img_foreign *f = &v->foreign[k];
        printf("  %4llu  ", (unsigned long long)k + 1);
        switch (f->kind) {
        case IMG_FOREIGN_DLSYM:
            fputs("dlsym(", stdout);
            if (f->a_len)
                print_str(f->a, f->a_len);
            else
                fputs("<main program>", stdout);
            fputs(", ", stdout);
            print_str(f->b, f->b_len);
            puts(")");
            break;
        case IMG_FOREIGN_FD:
            printf("fd(%s)\n", f->n == 0 ? "stdin" : f->n == 1 ? "stdout" : "stderr");
            break;
        case IMG_FOREIGN_CODE:
            fputs("code(", stdout);
            for (size_t i = 0; i < f->a_len; i++)
                printf("%02x", f->a[i]);
            fputs(", ", stdout);
            print_str(f->b, f->b_len);
            printf(", +0x%llx)\n", (unsigned long long)f->n);
            break;
        default:
            printf("ext(type '%.*s', \"", (int)v->types[f->n].name_len, v->types[f->n].name);
            print_str(f->a, f->a_len);
            puts("\")");
            break;
        }
    }
}

/* The position (1-based, region order) and type of the object whose unit
 * 0 is at word x of a verified region. */
static uint64_t object_at(const struct img_view *v, uint64_t x, uint32_t *type)
{
    uint64_t i = 0, at;
    struct img_walk it;
    struct img_obj o;
    const unsigned char *units;
    img_walk_init(&it, v);
    while (img_walk_next(&it, &o, &at, &units)) {
        i++;
        *type = o.type;
        if (at == x)
            break;
    }
    return i;
}

static void print_roots(const struct img_view *v)
{
    printf("roots (%llu)\n", (unsigned long long)v->hd.n_roots);
    for (uint64_t r = 0; r < v->hd.n_roots; r++) {
        fputs("  ", stdout);
        print_str(v->roots[r].name, v->roots[r].name_len);
        uint32_t t = 0;
        if (v->roots[r].index) {
            uint64_t i = object_at(v, v->roots[r].index, &t);
            printf(" -> object %llu ('%.*s')\n", (unsigned long long)i, (int)v->types[t].name_len,
                   v->types[t].name);
        } else
            puts(" -> nil");
    }
}

static void print_census(const struct img_view *v)
{
    uint64_t *objects = calloc(v->hd.n_types + 1, sizeof *objects);
    uint64_t *units = calloc(v->hd.n_types + 1, sizeof *units);
    if (!objects || !units) {
        free(objects);
        free(units);
        return;
    }
    /* The region is verified: every header word is sound. */
    struct img_walk it;
    struct img_obj o;
    uint64_t at;
    const unsigned char *us;
    img_walk_init(&it, v);
    while (img_walk_next(&it, &o, &at, &us)) {
        objects[o.type]++;
        units[o.type] += o.units;
    }
    printf("%-24s %12s %12s  %s\n", "type", "objects", "units", "shape");
    for (uint64_t t = 0; t < v->hd.n_types; t++) {
        const struct img_vtype *vt = &v->types[t];
        char shape[256];
        if (vt->shape_class == IMG_SHAPE_NONE)
            snprintf(shape, sizeof shape, "(none)");
        else if (vt->shape_class == IMG_SHAPE_CUSTOM)
            snprintf(shape, sizeof shape, "(per object)");
        else
            mp_img_shape_format(&vt->shape, shape, sizeof shape);
        printf("%-24.*s %12llu %12llu  %s\n", (int)vt->name_len, vt->name,
               (unsigned long long)objects[t], (unsigned long long)units[t], shape);
    }
    printf("%-24s %12llu\n", "total", (unsigned long long)v->hd.n_objects);
    free(objects);
    free(units);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return usage();
    const char *cmd = argv[1], *path = argv[2];
    int info = !strcmp(cmd, "info"), verify = !strcmp(cmd, "verify"),
        census = !strcmp(cmd, "census");
    if (!info && !verify && !census)
        return usage();
    size_t len = 0;
    unsigned char *buf = slurp(path, &len);
    if (!buf) {
        fprintf(stderr, "mimprof-image: cannot read %s: %s\n", path, strerror(errno));
        return 2;
    }
    struct img_view v;
    mp_img_error err;
    mp_img_status st = img_view_open(&v, buf, len, NULL, &err);
    if (st == MP_IMG_OK)
        st = img_view_check_objects(&v, &err);
    if (info) {
        printf("%-16s %s\n", "file", path);
        if (len >= sizeof(struct img_header) && !memcmp(buf, IMG_MAGIC, IMG_MAGIC_LEN))
            print_header(&v.hd, len);
        if (st == MP_IMG_OK)
            print_roots(&v);
    }
    if (census && st == MP_IMG_OK) {
        print_census(&v);
        print_foreign(&v);
    }
    if (st == MP_IMG_OK)
        printf("%s: ok\n", path);
    else
        printf("%s: refused: %s: %s\n", path, mp_img_strerror(st), err.detail);
    img_view_close(&v);
    free(buf);
    return st == MP_IMG_OK ? 0 : 1;
}
