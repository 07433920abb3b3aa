/* SPDX-License-Identifier: MIT */
/* The platform an image is tied to: the OS and architecture this library
 * was compiled for, as the header spells them. */
#include "format.h"
#include "internal.h"

#include <string.h>

#if defined(__linux__)
#define IMG_OS "linux"
#elif defined(__FreeBSD__)
#define IMG_OS "freebsd"
#elif defined(__APPLE__)
#define IMG_OS "darwin"
#else
#define IMG_OS "unknown"
#endif

#if defined(__x86_64__)
#define IMG_ARCH "x86_64"
#elif defined(__aarch64__)
#define IMG_ARCH "aarch64"
#elif defined(__i386__)
#define IMG_ARCH "i386"
#elif defined(__arm__)
#define IMG_ARCH "arm"
#elif defined(__riscv) && __riscv_xlen == 64
#define IMG_ARCH "riscv64"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define IMG_ARCH "ppc64le"
#elif defined(__powerpc64__)
#define IMG_ARCH "ppc64"
#elif defined(__s390x__)
#define IMG_ARCH "s390x"
#else
#define IMG_ARCH "unknown"
#endif

static void field(char out[IMG_TEXT_FIELD], const char *s)
{
    memset(out, 0, IMG_TEXT_FIELD);
    size_t n = strlen(s);
    memcpy(out, s, n < IMG_TEXT_FIELD - 1 ? n : IMG_TEXT_FIELD - 1);
}

void img_platform(char release[IMG_TEXT_FIELD], char os[IMG_TEXT_FIELD], char arch[IMG_TEXT_FIELD])
{
    field(release, MP_IMG_PACKAGE_VERSION);
    field(os, IMG_OS);
    field(arch, IMG_ARCH);
}
