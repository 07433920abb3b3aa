/* SPDX-License-Identifier: MIT */
/* Write and load throughput of 1M-object graphs: a cons list, a balanced
 * tree, and a string-heavy list. Each graph is written (trace, resolve,
 * write(2), fsync, rename) and loaded back (read, verify, checksum,
 * allocate, patch) `rounds` times; the best and median are reported with
 * the image's size overhead per object beyond its units, blob and header.
 *
 *   bench-image [DIR] [ROUNDS]     (DIR defaults to $TMPDIR or /tmp) */
#define _GNU_SOURCE
#include "format.h"

#include <mimprof/image.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define OBJECTS 1000000

struct types {
    mp_img_registry *reg;
    const mp_img_type *cons, *leaf, *str;
};

static void die(const char *what, const mp_img_error *err)
{
    fprintf(stderr, "bench-image: %s: %s\n", what, err ? err->detail : "failed");
    exit(1);
}

static mp_img_word *cons(mp_img_heap *h, const struct types *t, void *car, void *cdr)
{
    mp_img_word *c = mp_img_alloc(h, t->cons, 2);
    c[0] = (mp_img_word)car;
    c[1] = (mp_img_word)cdr;
    return c;
}

/* 500,000 conses holding 500,000 distinct integers. */
static void *build_list(mp_img_heap *h, const struct types *t)
{
    void *list = NULL;
    for (int i = 0; i < OBJECTS / 2; i++) {
        mp_img_word *leaf = mp_img_alloc(h, t->leaf, 1);
        leaf[0] = (mp_img_word)i;
        list = cons(h, t, leaf, list);
    }
    return list;
}

/* A complete binary tree of 2^20 - 1 = 1,048,575 conses. */
static void *build_tree(mp_img_heap *h, const struct types *t, int depth)
{
    if (depth == 0)
        return NULL;
    void *l = build_tree(h, t, depth - 1), *r = build_tree(h, t, depth - 1);
    return cons(h, t, l, r);
}

/* 500,000 strings of 8..63 bytes, in a list of 500,000 conses. */
static char *text;
static void *build_strings(mp_img_heap *h, const struct types *t)
{
    text = malloc(64 * 1024);
    for (int i = 0; i < 64 * 1024; i++)
        text[i] = (char)('a' + (i * 7) % 26);
    void *list = NULL;
    for (int i = 0; i < OBJECTS / 2; i++) {
        mp_img_word *s = mp_img_alloc(h, t->str, 2);
        s[0] = 8 + (size_t)(i * 13) % 56;
        s[1] = (mp_img_word)(text + (i * 31) % (63 * 1024));
        list = cons(h, t, s, list);
    }
    return list;
}

static void run(const struct types *t, const char *name, mp_img_heap *h, const char *dir,
                int rounds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/bench-%s.mpimg", dir, name);
    double *w = calloc((size_t)rounds, sizeof *w), *l = calloc((size_t)rounds, sizeof *l);
    double *wc = calloc((size_t)rounds, sizeof *wc), *lc = calloc((size_t)rounds, sizeof *lc);
    size_t objects = 0;
    mp_img_error err;
    for (int r = 0; r < rounds; r++) {
        double t0 = now(), c0 = cpu();
        if (mp_img_write(h, path, &err) != MP_IMG_OK)
            die("write", &err);
        double t1 = now(), c1 = cpu();
        mp_img_heap *back;
        if (mp_img_load(t->reg, path, &back, &err) != MP_IMG_OK)
            die("load", &err);
        double t2 = now(), c2 = cpu();
        objects = mp_img_heap_count(back);
        mp_img_heap_free(back);
        w[r] = t1 - t0, wc[r] = c1 - c0;
        l[r] = t2 - t1, lc[r] = c2 - c1;
    }
    qsort(w, (size_t)rounds, sizeof *w, cmp);
    qsort(l, (size_t)rounds, sizeof *l, cmp);
    qsort(wc, (size_t)rounds, sizeof *wc, cmp);
    qsort(lc, (size_t)rounds, sizeof *lc, cmp);
    /* Size accounting from the header: what is left after the header, the
     * small tables, the blob and the units themselves, per object. */
    FILE *f = fopen(path, "rb");
    struct img_header hd;
    if (!f || fread(&hd, sizeof hd, 1, f) != 1)
        die("reading the header back", NULL);
    fclose(f);
    struct stat sb;
    stat(path, &sb);
    /* The region holds in memory, per object, its metadata, its header
     * word and its units; the file's overhead is what it spends beyond a
     * word per unit (negative: runs store no header word per object, and
     * the references of an all-reference type in 32 bits). */
    uint64_t units = hd.region_words - (hd.meta_width + 1) * hd.n_objects;
    double overhead =
        ((double)sb.st_size - (double)sizeof hd - (double)hd.types_size - (double)hd.foreign_size -
         (double)hd.roots_size - (double)hd.n_bytes - 8.0 * (double)units) /
        (double)hd.n_objects;
    printf("%-8s %8zu objects, %5.1f MB, %.2f bytes/object beyond units, blob and header\n", name,
           objects, (double)sb.st_size / 1e6, overhead);
    printf("         write  cpu %6.1f ms (%5.1fM objects/s)  wall %6.1f ms (%5.1fM/s)  [median cpu "
           "%.1f, wall %.1f]\n",
           wc[0] * 1e3, (double)objects / wc[0] / 1e6, w[0] * 1e3, (double)objects / w[0] / 1e6,
           wc[rounds / 2] * 1e3, w[rounds / 2] * 1e3);
    printf("         load   cpu %6.1f ms (%5.1fM objects/s)  wall %6.1f ms (%5.1fM/s)  [median cpu "
           "%.1f, wall %.1f]\n",
           lc[0] * 1e3, (double)objects / lc[0] / 1e6, l[0] * 1e3, (double)objects / l[0] / 1e6,
           lc[rounds / 2] * 1e3, l[rounds / 2] * 1e3);
    unlink(path);
    free(w);
    free(l);
    free(wc);
    free(lc);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1)
        rounds = 1;
    struct types t;
    mp_img_error err;
    if (mp_img_registry_new(0, &t.reg, &err) ||
        mp_img_type_register(t.reg, "cons", &(mp_img_type_options){.spelling = "ref ref"}, &t.cons,
                             &err) ||
        mp_img_type_register(t.reg, "leaf", &(mp_img_type_options){.spelling = "word"}, &t.leaf,
                             &err) ||
        mp_img_type_register(t.reg, "str",
                             &(mp_img_type_options){.spelling = "word bytes",
                                                    .bytes_length = mp_img_bytes_prev_word},
                             &t.str, &err))
        die("types", &err);
    printf("mimprof-image %s, %d rounds, images in %s; best of %d (write includes fsync and "
           "rename, load includes read, verification and checksum)\n",
           mp_img_version(), rounds, dir, rounds);
    const char *names[3] = {"list", "tree", "strings"};
    for (int g = 0; g < 3; g++) {
        mp_img_heap *h;
        mp_img_heap_new(t.reg, &h, NULL);
        void *root = g == 0   ? build_list(h, &t)
                     : g == 1 ? build_tree(h, &t, 20)
                              : build_strings(h, &t);
        mp_img_root_set(h, "root", root, NULL);
        run(&t, names[g], h, dir, rounds);
        mp_img_heap_free(h);
    }
    free(text);
    mp_img_registry_free(t.reg);
    return 0;
}
