/* SPDX-License-Identifier: MIT */
/* Boot elision: restoring an interpreter-like heap from its image against
 * building it by parsing its s-expression text, side by side in one run.
 *
 *   bench-boot [DIR] [ROUNDS] [CONSES]
 *
 * Generates DIR/boot.sexp (program-like forms: interned symbols, integers,
 * strings, vectors, closures over C builtins) with at least CONSES cons
 * cells (default 1,000,000), writes its image, then times ROUNDS parses
 * (read + parse + intern) and ROUNDS loads (read + verify + resolve +
 * allocate + patch), checks both heaps print the same text, and reports the
 * medians and their ratio. Every timed parse and load runs in a fresh child
 * process, as a boot does: nothing is reused from an earlier round. */
#define _GNU_SOURCE
#include "sexp.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static uint64_t rng = 0x243F6A8885A308D3u;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const builtins[] = {"add", "sub", "mul", "min", "max"};
static const char *const keywords[] = {"define", "if", "let", "lambda", "cond", "quote", "set!",
                                       "begin",  "<",  "+",   "-",      "car",  "cdr",   "cons"};

static void gen_atom(FILE *f)
{
    unsigned r = rnd(100);
    if (r < 45)
        fprintf(f, "sym-%u", rnd(4096));
    else if (r < 60)
        fputs(keywords[rnd(sizeof keywords / sizeof keywords[0])], f);
    else if (r < 85)
        fprintf(f, "%d", (int)rnd(100000) - 500);
    else
        fprintf(f, "\"text %u with \\\"quotes\\\"\\n\"", rnd(1000));
}

/* Writes one form; returns the cons cells it makes. */
static size_t gen_form(FILE *f, int depth)
{
    unsigned r = rnd(100);
    if (depth >= 5 || r < 30) {
        gen_atom(f);
        return 0;
    }
    size_t conses = 0;
    if (r < 85) {
        unsigned n = 2 + rnd(5);
        fputc('(', f);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                fputc(' ', f);
            conses += 1 + gen_form(f, depth + 1);
        }
        fputc(')', f);
    } else if (r < 95) {
        unsigned n = 1 + rnd(4);
        fputs("#(", f);
        for (unsigned i = 0; i < n; i++) {
            if (i)
                fputc(' ', f);
            conses += gen_form(f, depth + 1);
        }
        fputc(')', f);
    } else {
        fprintf(f, "#<%s ", builtins[rnd(5)]);
        conses += gen_form(f, depth + 1);
        fputs(" >", f);
    }
    return conses;
}

static size_t generate(const char *path, size_t want)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t conses = 0;
    for (unsigned n = 0; conses < want; n++) {
        fprintf(f, "(define (fn-%u x y) ", n);
        conses += 5 + gen_form(f, 0) + 2; /* define, header (3), body, forms list */
        fputs(")\n", f);
    }
    fclose(f);
    return conses;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb))
        exit(1);
    char *buf = malloc((size_t)sb.st_size + 1);
    *len = fread(buf, 1, (size_t)sb.st_size, f);
    fclose(f);
    return buf;
}

static void fail(const char *what, const mp_img_error *err)
{
    fprintf(stderr, "bench-boot: %s: %s\n", what, err->detail);
    exit(1);
}

static void parse_file(struct sexp *sx, const struct sexp_types *ty, const char *path)
{
    mp_img_error err;
    size_t len;
    char *text = slurp(path, &len);
    if (sexp_new(sx, ty, &err) || sexp_parse(sx, text, len, &err))
        fail("parse", &err);
    free(text);
}

static void load_file(struct sexp *sx, const struct sexp_types *ty, const char *path)
{
    mp_img_error err;
    mp_img_heap *heap;
    if (mp_img_load(ty->reg, path, &heap, &err) != MP_IMG_OK || sexp_adopt(sx, ty, heap, &err))
        fail("load", &err);
}

/* Parses (or loads) `path` in a fresh child process and reports the child's
 * wall and CPU time for it. */
static void timed_boot(const struct sexp_types *ty, const char *path, int load, double *wall,
                       double *cputime)
{
    int fds[2];
    if (pipe(fds))
        exit(1);
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        close(fds[0]);
        struct sexp sx;
        double t0 = now(), c0 = cpu();
        if (load)
            load_file(&sx, ty, path);
        else
            parse_file(&sx, ty, path);
        double t[2] = {now() - t0, cpu() - c0};
        if (write(fds[1], t, sizeof t) != (ssize_t)sizeof t)
            _exit(1);
        _exit(0); /* the heap goes with the process, as at exit */
    }
    close(fds[1]);
    double t[2] = {0, 0};
    ssize_t got = read(fds[0], t, sizeof t);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof t || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench-boot: a timed %s failed\n", load ? "load" : "parse");
        exit(1);
    }
    *wall = t[0];
    *cputime = t[1];
}

static char *printed(const struct sexp *sx, size_t *len)
{
    char *buf;
    FILE *m = open_memstream(&buf, len);
    sexp_print_forms(sx, m);
    fclose(m);
    return buf;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    size_t want = argc > 3 ? (size_t)atol(argv[3]) : 1000000;
    if (rounds < 1)
        rounds = 1;
    char text_path[4096], image_path[4096];
    snprintf(text_path, sizeof text_path, "%s/boot.sexp", dir);
    snprintf(image_path, sizeof image_path, "%s/boot.mpimg", dir);
    size_t conses = generate(text_path, want);

    struct sexp_types ty;
    mp_img_error err;
    if (sexp_types_init(&ty, &err))
        fail("types", &err);
    struct sexp sx;
    parse_file(&sx, &ty, text_path);
    if (mp_img_write(sx.heap, image_path, &err) != MP_IMG_OK)
        fail("write", &err);
    size_t la, lb;
    char *a = printed(&sx, &la);
    size_t objects = mp_img_heap_count(sx.heap);
    sexp_free(&sx);
    load_file(&sx, &ty, image_path);
    char *b = printed(&sx, &lb);
    size_t loaded = mp_img_heap_count(sx.heap);
    sexp_free(&sx);
    if (la != lb || memcmp(a, b, la) != 0) {
        fprintf(stderr, "bench-boot: the loaded heap prints differently\n");
        return 1;
    }
    free(a);
    free(b);

    double *tp = calloc((size_t)rounds, sizeof *tp), *tl = calloc((size_t)rounds, sizeof *tl);
    double *cp = calloc((size_t)rounds, sizeof *cp), *cl = calloc((size_t)rounds, sizeof *cl);
    for (int r = 0; r < rounds; r++) { /* interleaved, so drift hits both */
        timed_boot(&ty, text_path, 0, &tp[r], &cp[r]);
        timed_boot(&ty, image_path, 1, &tl[r], &cl[r]);
    }
    qsort(tp, (size_t)rounds, sizeof *tp, cmp);
    qsort(tl, (size_t)rounds, sizeof *tl, cmp);
    qsort(cp, (size_t)rounds, sizeof *cp, cmp);
    qsort(cl, (size_t)rounds, sizeof *cl, cmp);
    struct stat st_text, st_image;
    stat(text_path, &st_text);
    stat(image_path, &st_image);
    int m = rounds / 2;
    printf("text  %s: %.1f MB, %zu cons cells, %zu objects on the parsed heap\n", text_path,
           (double)st_text.st_size / 1e6, conses, objects);
    printf("image %s: %.1f MB, %zu objects (reachable only)\n", image_path,
           (double)st_image.st_size / 1e6, loaded);
    printf("parse: cpu median %7.1f ms best %7.1f ms | wall median %7.1f ms best %7.1f ms\n",
           cp[m] * 1e3, cp[0] * 1e3, tp[m] * 1e3, tp[0] * 1e3);
    printf("load:  cpu median %7.1f ms best %7.1f ms | wall median %7.1f ms best %7.1f ms\n",
           cl[m] * 1e3, cl[0] * 1e3, tl[m] * 1e3, tl[0] * 1e3);
    printf("boot elision: load is %.1fx faster than parse in cpu time, %.1fx in wall time "
           "(medians of %d interleaved rounds, each in a fresh process)\n",
           cp[m] / cl[m], tp[m] / tl[m], rounds);
    free(cp);
    free(cl);
    free(tp);
    free(tl);
    sexp_types_free(&ty);
    return 0;
}
