/* SPDX-License-Identifier: MIT */
/* A dlopen'd library with one call site (compiled -O2 -g). */
#include <stdint.h>

typedef void (*dlsite_cb)(int line);

__attribute__((noinline)) void report_dl_site(dlsite_cb cb)
{
    cb(__LINE__);
    __asm__ volatile("" ::: "memory");
}
