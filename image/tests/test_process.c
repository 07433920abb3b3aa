/* SPDX-License-Identifier: MIT */
/* Across processes: an image written here is loaded by another program
 * (fork + exec of image-test-loader), where a `dlsym` foreign unit is
 * reacquired and called, and a `code` unit is resolved by build-id when a
 * module with that build-id is loaded (under any path), and kept as a named
 * location (build-id, offset) when it is not. */
#define _GNU_SOURCE
#include "fixture.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static struct fx f;
static void *plugin;
static int (*triple)(int);

static void setup(void)
{
    fx_init(&f, 0);
    plugin = dlopen(fx_env("IMGTEST_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(plugin, "%s", dlerror());
    *(void **)&triple = dlsym(plugin, "imgtest_plugin_triple");
    cr_assert_not_null(triple);
}

static void teardown(void)
{
    dlclose(plugin);
    fx_free(&f);
}

TestSuite(process, .init = setup, .fini = teardown);

/* Runs the loader with `args` (NULL-terminated) and returns its stdout. */
static char *run_loader(const char *const *args, int *status)
{
    const char *argv[8] = {fx_env("IMGTEST_LOADER")};
    for (int i = 0; args[i] && i < 6; i++)
        argv[i + 1] = args[i];
    return fx_run(argv, status);
}

Test(process, dlsym_foreign_is_reacquired_and_callable_elsewhere)
{
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_word *fn = mp_img_alloc(h, f.fn, 2);
    fn[0] = (mp_img_word)(uintptr_t)triple;
    mp_img_root_set(h, "fn", fn, NULL);
    char *path = fx_path("dlsym.mpimg");
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, path, &err), MP_IMG_OK, "%s", err.detail);
    mp_img_heap_free(h);
    int status;
    char *out = run_loader((const char *[]){path, NULL}, &status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "loader failed: %s", out);
    cr_assert_str_eq(out, "call 42\n");
    free(out);
    free(path);
}

static char *hexs(const unsigned char *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        sprintf(s + 2 * i, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

Test(process, code_foreign_by_build_id)
{
    /* An instruction address inside the plugin, not a symbol start. */
    uintptr_t addr = (uintptr_t)triple + 3;
    mp_img_code here;
    cr_assert(mp_img_code_lookup(NULL, addr, &here));
    cr_assert_gt(here.build_id_len, 0, "the plugin has a build-id");
    char *id = hexs(here.build_id, here.build_id_len);
    mp_img_heap *h;
    mp_img_heap_new(f.reg, &h, NULL);
    mp_img_word *code = mp_img_alloc(h, f.code, 2);
    code[0] = addr;
    code[1] = 1234;
    mp_img_root_set(h, "code", code, NULL);
    char *path = fx_path("code.mpimg");
    mp_img_error err;
    cr_assert_eq(mp_img_write(h, path, &err), MP_IMG_OK, "%s", err.detail);
    mp_img_heap_free(h);

    /* Module absent: a named location. */
    int status;
    char *out = run_loader((const char *[]){path, NULL}, &status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "loader failed: %s", out);
    char expect[512];
    snprintf(expect, sizeof expect, "code absent build-id %s offset 0x%lx path %s\n", id,
             (unsigned long)here.offset, here.path);
    cr_assert_str_eq(out, expect);
    free(out);

    /* Module present, loaded from another path: resolved by build-id. */
    char *copy = fx_path("renamed-plugin.so");
    size_t len;
    unsigned char *so = fx_read(fx_env("IMGTEST_PLUGIN"), &len);
    cr_assert_not_null(so);
    cr_assert_eq(fx_write(copy, so, len), 0);
    free(so);
    out = run_loader((const char *[]){"--dlopen", copy, path, NULL}, &status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "loader failed: %s", out);
    unsigned long plugin_addr = 0, resolved = 0, offset = 0;
    char got_id[256];
    cr_assert_eq(sscanf(out, "plugin 0x%lx\ncode resolved 0x%lx build-id %255s offset 0x%lx",
                        &plugin_addr, &resolved, got_id, &offset),
                 4, "unexpected output: %s", out);
    cr_assert_eq(resolved, plugin_addr + 3, "resolved to the same instruction");
    cr_assert_str_eq(got_id, id);
    cr_assert_eq(offset, here.offset);
    free(out);
    free(copy);
    free(id);
    free(path);
}
