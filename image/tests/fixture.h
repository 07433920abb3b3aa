/* SPDX-License-Identifier: MIT */
/* The types every test, the test loader and the fuzzer register, in one
 * order, so that their images agree on the type table. */
#ifndef MP_IMG_TEST_FIXTURE_H
#define MP_IMG_TEST_FIXTURE_H

#include <mimprof/image.h>

#include <stddef.h>

struct fx {
    mp_img_registry *reg;
    const mp_img_type *node;        /* "ref ref" */
    const mp_img_type *leaf;        /* "word" */
    const mp_img_type *vec;         /* "*: word ref" */
    const mp_img_type *str;         /* "word bytes", length in unit 0 */
    const mp_img_type *cstr;        /* "bytes", NUL-terminated */
    const mp_img_type *fn;          /* "foreign ref", resolved (nil, fd, dlsym) */
    const mp_img_type *code;        /* "foreign word", code(build-id, path, offset) */
    const mp_img_type *handle;      /* "foreign", externalise/internalise */
    const mp_img_type *temp;        /* "word foreign", dropped */
    const mp_img_type *raw;         /* "foreign", no policy */
    const mp_img_type *blob;        /* no shape */
    const mp_img_type *var;         /* per-object shape: word n, then n refs */
    int externalised, internalised; /* callback calls */
};

/* Registers the fixture types with metadata width `meta`; aborts on failure. */
void fx_init(struct fx *f, size_t meta);
void fx_free(struct fx *f);

/* A list of n fixture nodes on h, each node's unit 1 the next (the last
 * nil), as fx's node type f->node; returns the head. Aborts on failure. */
void *fx_list(mp_img_heap *h, const struct fx *f, int n);

/* A fresh empty directory under TMPDIR (or /tmp), removed when the process
 * that made it exits, and a path inside it. */
const char *fx_tmpdir(void);
char *fx_path(const char *name); /* malloc'ed */

/* Reads a whole file (malloc'ed); NULL on error. */
unsigned char *fx_read(const char *path, size_t *len);
/* Writes a whole file; 0 on success. */
int fx_write(const char *path, const void *data, size_t len);

/* Structural and identity comparison of the graphs reachable from a in ha
 * and b in hb: same types, flags, metadata and units; references form a
 * bijection (shared stays shared, distinct stays distinct); bytes equal;
 * foreign values equal, except dropped ones, which must be NULL in b.
 * Returns 1 if isomorphic, else 0 with the reason in why. */
int fx_iso(const mp_img_heap *ha, const void *a, const mp_img_heap *hb, const void *b,
           char why[256]);
/* fx_iso over every root, which must have the same names. */
int fx_iso_roots(const mp_img_heap *ha, const mp_img_heap *hb, char why[256]);

/* Runs argv[0] with argv (NULL-terminated) in a child process and returns
 * its standard output (malloc'ed); *status is the waitpid() status. */
char *fx_run(const char *const *argv, int *status);
/* The value of environment variable `name` (set by meson test); aborts if unset. */
const char *fx_env(const char *name);

/* Rewrites the checksum of an image in memory so that it is valid again. */
void fx_fix_checksum(unsigned char *img, size_t len);

#endif /* MP_IMG_TEST_FIXTURE_H */
