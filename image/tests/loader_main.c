/* SPDX-License-Identifier: MIT */
/* image-test-loader [--dlopen LIB] IMAGE: loads an image written by another
 * process (the tests) with the fixture types and reports, one line each:
 *   call N             root "fn": the reacquired function called with 14
 *   code resolved ADDR build-id HEX offset 0xOFF
 *   code absent build-id HEX offset 0xOFF path PATH
 *   plugin ADDR        with --dlopen: imgtest_plugin_triple in this process
 * Exit status 0, or 1 with the refusal on stderr. */
#define _GNU_SOURCE
#include "fixture.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void hex(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
}

int main(int argc, char **argv)
{
    const char *lib = NULL, *image = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dlopen") && i + 1 < argc)
            lib = argv[++i];
        else
            image = argv[i];
    }
    if (!image) {
        fputs("usage: image-test-loader [--dlopen LIB] IMAGE\n", stderr);
        return 2;
    }
    void *handle = NULL;
    if (lib) {
        handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        printf("plugin 0x%lx\n", (unsigned long)(uintptr_t)dlsym(handle, "imgtest_plugin_triple"));
    }
    struct fx f;
    fx_init(&f, 0);
    mp_img_heap *h;
    mp_img_error err;
    if (mp_img_load(f.reg, image, &h, &err) != MP_IMG_OK) {
        fprintf(stderr, "load: %s: %s\n", mp_img_strerror(err.status), err.detail);
        fx_free(&f);
        return 1;
    }
    mp_img_word *fn = mp_img_root_get(h, "fn");
    if (fn) {
        int (*triple)(int) = (int (*)(int))fn[0];
        printf("call %d\n", triple(14));
    }
    mp_img_word *code = mp_img_root_get(h, "code");
    if (code) {
        mp_img_code loc;
        if (!mp_img_code_lookup(h, code[0], &loc)) {
            puts("code unknown");
        } else if (loc.address) {
            printf("code resolved 0x%lx build-id ", (unsigned long)loc.address);
            hex(loc.build_id, loc.build_id_len);
            printf(" offset 0x%lx\n", (unsigned long)loc.offset);
        } else {
            fputs("code absent build-id ", stdout);
            hex(loc.build_id, loc.build_id_len);
            printf(" offset 0x%lx path %s\n", (unsigned long)loc.offset, loc.path);
        }
    }
    mp_img_heap_free(h);
    fx_free(&f);
    if (handle)
        dlclose(handle);
    return 0;
}
