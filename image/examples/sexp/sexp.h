/* SPDX-License-Identifier: MIT */
/* mimprof-sexp: an interpreter-like heap on mimprof-image, built by parsing
 * s-expression text or by loading an image of it. The example behind the
 * boot-elision benchmark: both roads end in the same heap.
 *
 * Types (registered in this order by sexp_types_init):
 *   symbol  "word bytes"   length, name (interned: one object per name)
 *   string  "word bytes"   length, bytes (may hold NULs)
 *   integer "word"         the value
 *   cons    "ref ref"      car, cdr
 *   vector  "*: word ref"  count, elements
 *   closure "foreign ref"  a C builtin (named by dlsym), a captured form
 *   symtab  "word ref"     symbol count, bucket vector (lists of symbols)
 * Roots: "forms" (the list of top-level forms) and "symbols" (the symtab). */
#ifndef MIMPROF_SEXP_H
#define MIMPROF_SEXP_H

#include <mimprof/image.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sexp_types {
    mp_img_registry *reg;
    const mp_img_type *symbol, *string, *integer, *cons, *vector, *closure, *symtab;
};

/* Bytes of parsed strings and symbol names (loaded ones live in the image
 * heap's blob). */
struct sexp_arena {
    char **blocks;
    size_t n, cap;
    char *cur;
    size_t left;
};

struct sexp {
    const struct sexp_types *ty;
    mp_img_heap *heap;
    struct sexp_arena arena;
    mp_img_word *symtab; /* [count, buckets] */
};

/* A builtin a closure can hold: an exported function mimprof_sexp_fn_NAME,
 * found by dlsym (so the image names it by dlsym too). */
typedef intptr_t (*sexp_builtin_fn)(intptr_t a, intptr_t b);
/* The builtin called `name` (len bytes), looked up by dlsym, or NULL. */
sexp_builtin_fn sexp_builtin(const char *name, size_t len);
/* The name of a builtin (by dladdr), or NULL if fn is not one. */
const char *sexp_builtin_name(sexp_builtin_fn fn);

int sexp_types_init(struct sexp_types *ty, mp_img_error *err);
void sexp_types_free(struct sexp_types *ty);

/* An empty heap with an empty symbol table. */
int sexp_new(struct sexp *sx, const struct sexp_types *ty, mp_img_error *err);
/* Takes over a loaded image heap (its "symbols" root becomes the table). */
int sexp_adopt(struct sexp *sx, const struct sexp_types *ty, mp_img_heap *heap, mp_img_error *err);
void sexp_free(struct sexp *sx);

/* Constructors; NULL on ENOMEM. */
mp_img_word *sexp_intern(struct sexp *sx, const char *name, size_t len);
mp_img_word *sexp_string(struct sexp *sx, const char *bytes, size_t len);
mp_img_word *sexp_integer(struct sexp *sx, intptr_t value);
mp_img_word *sexp_cons(struct sexp *sx, void *car, void *cdr);
mp_img_word *sexp_vector(struct sexp *sx, size_t count);
mp_img_word *sexp_closure(struct sexp *sx, sexp_builtin_fn fn, void *captured);

/* Parses every top-level form of text[0..len) onto the heap and sets the
 * "forms" root to their list. Returns 0, or -1 with a message in err. */
int sexp_parse(struct sexp *sx, const char *text, size_t len, mp_img_error *err);

/* Prints every top-level form of the "forms" root, one per line. */
int sexp_print_forms(const struct sexp *sx, FILE *out);

#endif /* MIMPROF_SEXP_H */
