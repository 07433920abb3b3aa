/* SPDX-License-Identifier: MIT */
/* mimprof-sexp: build an interpreter-like heap from s-expression text, or
 * restore it from an image.
 *
 *   mimprof-sexp parse IN.sexp [--write-image OUT.mpimg] [--print]
 *   mimprof-sexp load IN.mpimg [--print]
 *
 * --print writes the heap's top-level forms back as text, one per line, so
 * `parse X --print` and `load (image of X) --print` can be compared. */
#define _GNU_SOURCE
#include "sexp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fputs("usage: mimprof-sexp parse IN.sexp [--write-image OUT.mpimg] [--print]\n"
          "       mimprof-sexp load IN.mpimg [--print]\n",
          stderr);
    return 2;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *b = realloc(buf, cap * 2);
        if (!b)
            free(buf);
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

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *cmd = argv[1], *in = argv[2], *image = NULL;
    int print = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--print"))
            print = 1;
        else if (!strcmp(argv[i], "--write-image") && i + 1 < argc && !strcmp(cmd, "parse"))
            image = argv[++i];
        else
            return usage();
    }
    struct sexp_types ty;
    mp_img_error err = {0};
    if (sexp_types_init(&ty, &err)) {
        fprintf(stderr, "mimprof-sexp: %s\n", err.detail);
        return 1;
    }
    struct sexp sx;
    int rc = 1;
    if (!strcmp(cmd, "parse")) {
        size_t len;
        char *text = slurp(in, &len);
        if (!text) {
            fprintf(stderr, "mimprof-sexp: cannot read %s: %s\n", in, strerror(errno));
            goto out_types;
        }
        if (sexp_new(&sx, &ty, &err) || sexp_parse(&sx, text, len, &err)) {
            fprintf(stderr, "mimprof-sexp: %s: %s\n", in, err.detail);
            free(text);
            if (sx.heap)
                sexp_free(&sx);
            goto out_types;
        }
        free(text);
        if (image && mp_img_write(sx.heap, image, &err) != MP_IMG_OK) {
            fprintf(stderr, "mimprof-sexp: writing %s: %s: %s\n", image,
                    mp_img_strerror(err.status), err.detail);
            goto out_heap;
        }
    } else if (!strcmp(cmd, "load")) {
        mp_img_heap *heap;
        if (mp_img_load(ty.reg, in, &heap, &err) != MP_IMG_OK) {
            fprintf(stderr, "mimprof-sexp: loading %s: %s: %s\n", in, mp_img_strerror(err.status),
                    err.detail);
            goto out_types;
        }
        if (sexp_adopt(&sx, &ty, heap, &err)) {
            fprintf(stderr, "mimprof-sexp: %s: %s\n", in, err.detail);
            mp_img_heap_free(heap);
            goto out_types;
        }
    } else {
        sexp_types_free(&ty);
        return usage();
    }
    rc = 0;
    if (print && sexp_print_forms(&sx, stdout)) {
        fprintf(stderr, "mimprof-sexp: printing failed\n");
        rc = 1;
    }
out_heap:
    sexp_free(&sx);
out_types:
    sexp_types_free(&ty);
    return rc;
}
