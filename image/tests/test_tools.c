/* SPDX-License-Identifier: MIT */
/* The package's programs: mimprof-sexp turns text into a heap and an image
 * back into the same text; mimprof-image reports and verifies images. */
#define _GNU_SOURCE
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char *sample_path(void)
{
    char *p = NULL;
    if (asprintf(&p, "%s/sample.sexp", fx_env("IMGTEST_DATA")) < 0)
        abort();
    return p;
}

static char *run(const char *prog, const char *a, const char *b, const char *c, const char *d,
                 int *code)
{
    const char *argv[] = {fx_env(prog), a, b, c, d, NULL};
    int status;
    char *out = fx_run(argv, &status);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return out;
}

static char *make_image(const char *name)
{
    char *sample = sample_path(), *image = fx_path(name);
    int code;
    char *out = run("MIMPROF_SEXP", "parse", sample, "--write-image", image, &code);
    cr_assert_eq(code, 0, "parse failed: %s", out);
    free(out);
    free(sample);
    return image;
}

Test(tools, sexp_round_trip_through_an_image)
{
    char *sample = sample_path();
    size_t len;
    char *text = (char *)fx_read(sample, &len);
    cr_assert_not_null(text);
    char *image = make_image("sample.mpimg");
    int code;
    char *parsed = run("MIMPROF_SEXP", "parse", sample, "--print", NULL, &code);
    cr_assert_eq(code, 0);
    char *loaded = run("MIMPROF_SEXP", "load", image, "--print", NULL, &code);
    cr_assert_eq(code, 0, "load failed");
    cr_assert_eq(strlen(loaded), len);
    cr_assert_eq(memcmp(loaded, text, len), 0, "loaded heap prints differently:\n%s", loaded);
    cr_assert_str_eq(parsed, loaded);
    free(parsed);
    free(loaded);
    free(text);
    free(image);
    free(sample);
}

Test(tools, image_info_verify_census)
{
    char *image = make_image("tool.mpimg");
    int code;
    char *out = run("MIMPROF_IMAGE_TOOL", "verify", image, NULL, NULL, &code);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, ": ok\n"), "%s", out);
    free(out);
    out = run("MIMPROF_IMAGE_TOOL", "info", image, NULL, NULL, &code);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "release          0.1.0\n"), "%s", out);
    cr_assert(strstr(out, "incomplete       no\n"), "%s", out);
    /* objects are numbered in region order: type by type */
    cr_assert(strstr(out, "  forms -> object ") && strstr(out, " ('cons')\n"), "%s", out);
    cr_assert(strstr(out, "  symbols -> object 137 ('symtab')\n"), "%s", out);
    free(out);
    out = run("MIMPROF_IMAGE_TOOL", "census", image, NULL, NULL, &code);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "cons "), "%s", out);
    cr_assert(strstr(out, "*: word ref"), "%s", out);
    cr_assert(strstr(out, "dlsym(<main program>, mimprof_sexp_fn_add)"), "%s", out);
    cr_assert(strstr(out, "dlsym(<main program>, mimprof_sexp_fn_max)"), "%s", out);
    free(out);
    free(image);
}

Test(tools, damaged_images_are_refused_by_both_programs)
{
    char *image = make_image("damaged.mpimg");
    size_t len;
    unsigned char *data = fx_read(image, &len);
    data[len / 2] ^= 0x10;
    cr_assert_eq(fx_write(image, data, len), 0);
    free(data);
    int code;
    char *out = run("MIMPROF_IMAGE_TOOL", "verify", image, NULL, NULL, &code);
    cr_assert_eq(code, 1, "%s", out);
    cr_assert(strstr(out, "refused: image checksum mismatch"), "%s", out);
    free(out);
    out = run("MIMPROF_SEXP", "load", image, "--print", NULL, &code);
    cr_assert_eq(code, 1);
    cr_assert_str_eq(out, "", "nothing printed from a refused image");
    free(out);
    out = run("MIMPROF_IMAGE_TOOL", "frobnicate", image, NULL, NULL, &code);
    cr_assert_eq(code, 2);
    free(out);
    free(image);
}
