/* SPDX-License-Identifier: MIT */
/* Configure-time probe (meson.build): prints the file the linked mimalloc
 * is loaded from, e.g. /lib/x86_64-linux-gnu/libmimalloc.so.2, whose name
 * (the soname the loader looked up) the override names as its filtee. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mimalloc.h>
#include <stdio.h>

int main(void)
{
    Dl_info info;
    if (!dladdr((void *)mi_malloc, &info) || info.dli_fname == NULL)
        return 1;
    puts(info.dli_fname);
    return 0;
}
