/* SPDX-License-Identifier: MIT */
/* The sexp heap: its types, interning, constructors and byte arena. */
#include "sexp.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK ((size_t)1 << 20)
#define SYMTAB_MIN  1024

int sexp_types_init(struct sexp_types *ty, mp_img_error *err)
{
    memset(ty, 0, sizeof *ty);
    if (mp_img_registry_new(0, &ty->reg, err) != MP_IMG_OK)
        return -1;
    mp_img_type_options text = {.spelling = "word bytes", .bytes_length = mp_img_bytes_prev_word};
    mp_img_type_options word = {.spelling = "word"};
    mp_img_type_options pair = {.spelling = "ref ref"};
    mp_img_type_options vec = {.spelling = "*: word ref"};
    mp_img_type_options clo = {.spelling = "foreign ref", .foreign = MP_IMG_FOREIGN_RESOLVE};
    mp_img_type_options tab = {.spelling = "word ref"};
    if (mp_img_type_register(ty->reg, "symbol", &text, &ty->symbol, err) ||
        mp_img_type_register(ty->reg, "string", &text, &ty->string, err) ||
        mp_img_type_register(ty->reg, "integer", &word, &ty->integer, err) ||
        mp_img_type_register(ty->reg, "cons", &pair, &ty->cons, err) ||
        mp_img_type_register(ty->reg, "vector", &vec, &ty->vector, err) ||
        mp_img_type_register(ty->reg, "closure", &clo, &ty->closure, err) ||
        mp_img_type_register(ty->reg, "symtab", &tab, &ty->symtab, err)) {
        mp_img_registry_free(ty->reg);
        ty->reg = NULL;
        return -1;
    }
    return 0;
}

void sexp_types_free(struct sexp_types *ty)
{
    mp_img_registry_free(ty->reg);
    ty->reg = NULL;
}

static char *arena_copy(struct sexp_arena *a, const char *src, size_t len)
{
    size_t need = len + 1;
    if (need > a->left) {
        size_t size = need > ARENA_BLOCK ? need : ARENA_BLOCK;
        if (a->n == a->cap) {
            size_t cap = a->cap ? a->cap * 2 : 16;
            char **b = realloc(a->blocks, cap * sizeof *b);
            if (!b)
                return NULL;
            a->blocks = b;
            a->cap = cap;
        }
        char *block = malloc(size);
        if (!block)
            return NULL;
        a->blocks[a->n++] = block;
        a->cur = block;
        a->left = size;
    }
    char *dst = a->cur;
    memcpy(dst, src, len);
    dst[len] = '\0';
    a->cur += need;
    a->left -= need;
    return dst;
}

static mp_img_word *new_symtab(struct sexp *sx, size_t buckets)
{
    mp_img_word *tab = mp_img_alloc(sx->heap, sx->ty->symtab, 2);
    mp_img_word *vec = mp_img_alloc(sx->heap, sx->ty->vector, buckets + 1);
    if (!tab || !vec)
        return NULL;
    tab[1] = (mp_img_word)vec;
    return tab;
}

int sexp_new(struct sexp *sx, const struct sexp_types *ty, mp_img_error *err)
{
    memset(sx, 0, sizeof *sx);
    sx->ty = ty;
    if (mp_img_heap_new(ty->reg, &sx->heap, err) != MP_IMG_OK)
        return -1;
    sx->symtab = new_symtab(sx, SYMTAB_MIN);
    if (!sx->symtab || mp_img_root_set(sx->heap, "symbols", sx->symtab, err) != MP_IMG_OK) {
        sexp_free(sx);
        return -1;
    }
    return 0;
}

int sexp_adopt(struct sexp *sx, const struct sexp_types *ty, mp_img_heap *heap, mp_img_error *err)
{
    memset(sx, 0, sizeof *sx);
    sx->ty = ty;
    sx->heap = heap;
    sx->symtab = mp_img_root_get(heap, "symbols");
    if (!sx->symtab || mp_img_type_of(heap, sx->symtab) != ty->symtab) {
        if (err)
            snprintf(err->detail, sizeof err->detail, "the image has no symbol table root");
        sx->heap = NULL;
        return -1;
    }
    return 0;
}

void sexp_free(struct sexp *sx)
{
    mp_img_heap_free(sx->heap);
    for (size_t i = 0; i < sx->arena.n; i++)
        free(sx->arena.blocks[i]);
    free(sx->arena.blocks);
    memset(sx, 0, sizeof *sx);
}

static uint64_t name_hash(const char *s, size_t len)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* Doubles the bucket vector when symbols outnumber buckets twice over; the
 * old vector and conses become garbage (unreachable, never imaged). */
static int symtab_grow(struct sexp *sx)
{
    mp_img_word *old = (mp_img_word *)sx->symtab[1];
    size_t n = old[0] * 2;
    mp_img_word *vec = mp_img_alloc(sx->heap, sx->ty->vector, n + 1);
    if (!vec)
        return -1;
    for (size_t b = 1; b <= old[0]; b++)
        for (mp_img_word *c = (mp_img_word *)old[b]; c; c = (mp_img_word *)c[1]) {
            mp_img_word *sym = (mp_img_word *)c[0];
            size_t nb = 1 + name_hash((const char *)sym[1], sym[0]) % n;
            mp_img_word *cell = sexp_cons(sx, sym, (void *)vec[nb]);
            if (!cell)
                return -1;
            vec[nb] = (mp_img_word)cell;
        }
    sx->symtab[1] = (mp_img_word)vec;
    return 0;
}

mp_img_word *sexp_intern(struct sexp *sx, const char *name, size_t len)
{
    mp_img_word *vec = (mp_img_word *)sx->symtab[1];
    size_t b = 1 + name_hash(name, len) % vec[0];
    for (mp_img_word *c = (mp_img_word *)vec[b]; c; c = (mp_img_word *)c[1]) {
        mp_img_word *sym = (mp_img_word *)c[0];
        if (sym[0] == len && memcmp((const char *)sym[1], name, len) == 0)
            return sym;
    }
    mp_img_word *sym = mp_img_alloc(sx->heap, sx->ty->symbol, 2);
    char *bytes = arena_copy(&sx->arena, name, len);
    if (!sym || !bytes)
        return NULL;
    sym[0] = len;
    sym[1] = (mp_img_word)bytes;
    mp_img_word *cell = sexp_cons(sx, sym, (void *)vec[b]);
    if (!cell)
        return NULL;
    vec[b] = (mp_img_word)cell;
    if (++sx->symtab[0] > 2 * vec[0] && symtab_grow(sx))
        return NULL;
    return sym;
}

mp_img_word *sexp_string(struct sexp *sx, const char *bytes, size_t len)
{
    mp_img_word *s = mp_img_alloc(sx->heap, sx->ty->string, 2);
    char *copy = arena_copy(&sx->arena, bytes, len);
    if (!s || !copy)
        return NULL;
    s[0] = len;
    s[1] = (mp_img_word)copy;
    return s;
}

mp_img_word *sexp_integer(struct sexp *sx, intptr_t value)
{
    mp_img_word *i = mp_img_alloc(sx->heap, sx->ty->integer, 1);
    if (i)
        i[0] = (mp_img_word)value;
    return i;
}

mp_img_word *sexp_cons(struct sexp *sx, void *car, void *cdr)
{
    mp_img_word *c = mp_img_alloc(sx->heap, sx->ty->cons, 2);
    if (c) {
        c[0] = (mp_img_word)car;
        c[1] = (mp_img_word)cdr;
    }
    return c;
}

mp_img_word *sexp_vector(struct sexp *sx, size_t count)
{
    return mp_img_alloc(sx->heap, sx->ty->vector, count + 1);
}

mp_img_word *sexp_closure(struct sexp *sx, sexp_builtin_fn fn, void *captured)
{
    mp_img_word *c = mp_img_alloc(sx->heap, sx->ty->closure, 2);
    if (c) {
        c[0] = (mp_img_word)(uintptr_t)fn;
        c[1] = (mp_img_word)captured;
    }
    return c;
}
