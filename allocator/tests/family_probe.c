/* SPDX-License-Identifier: MIT */
/* family-probe: one line per semantic of the malloc family's contract
 * (<mimprof/sys-override.inc.h>), "member case: observed", for
 * test_override_semantics.py, which runs it under raw mimalloc and under
 * the override. Linked with no allocator; built with -fno-builtin so that
 * every call is a call (GCC assumes some members leave errno alone). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile size_t huge = SIZE_MAX / 2, max = SIZE_MAX, big_count = (size_t)1 << 62;

static const char *errname(int err)
{
    if (err == 0)
        return "0";
    if (err == ENOMEM)
        return "ENOMEM";
    return err == EINVAL ? "EINVAL" : "other";
}

static void ptr(const char *what, void *p, int err)
{
    printf("%s: %s errno=%s\n", what, p ? "ptr" : "NULL", errname(err));
    free(p);
}

#define PTR(what, expr)                                                                            \
    do {                                                                                           \
        errno = 0;                                                                                 \
        void *p_ = (expr);                                                                         \
        ptr(what, p_, errno);                                                                      \
    } while (0)

/* The object that defines `fn` as the program sees it ("libmimalloc",
 * "override-glibc", "override", "libc"). */
static const char *owner(uintptr_t fn)
{
    Dl_info info;
    if (!dladdr((void *)fn, &info) || info.dli_fname == NULL)
        return "?";
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strncmp(base, "libmimalloc.so", 14) == 0)
        return "libmimalloc";
    if (strstr(base, "override-glibc") != NULL)
        return "override-glibc";
    if (strstr(base, "override") != NULL)
        return "override";
    if (strncmp(base, "libc.so", 7) == 0)
        return "libc";
    return base;
}

int main(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p;
    int rc;

    PTR("malloc size_max", malloc(max));
    PTR("malloc huge", malloc(huge));
    PTR("malloc zero", malloc(0));

    PTR("calloc overflow", calloc(big_count, 8));
    PTR("calloc huge", calloc(1, huge));
    PTR("calloc zero", calloc(0, 0));
    p = calloc(100, 10);
    printf("calloc zeroed: %d\n", p && ((unsigned char *)p)[999] == 0);
    free(p);

    p = malloc(100);
    memset(p, 7, 100);
    errno = 0;
    void *q = realloc(p, huge);
    int err = errno;
    printf("realloc huge: %s errno=%s intact=%d\n", q ? "ptr" : "NULL", errname(err),
           ((unsigned char *)p)[99] == 7);
    PTR("realloc zero", realloc(p, 0)); /* glibc: p freed, NULL */
    PTR("realloc null", realloc(NULL, 10));
    p = malloc(10);
    PTR("reallocarray overflow", reallocarray(p, big_count, 8));
    PTR("reallocarray zero", reallocarray(p, 4, 0));

    p = NULL;
    rc = posix_memalign(&p, 3, 8);
    printf("posix_memalign align3: %d\n", rc);
    rc = posix_memalign(&p, 4, 8);
    printf("posix_memalign align4: %d\n", rc);
    rc = posix_memalign(&p, 64, huge);
    printf("posix_memalign huge: %d\n", rc);
    rc = posix_memalign(&p, 4096, 10);
    printf("posix_memalign 4096: %d aligned=%d\n", rc, rc == 0 && (uintptr_t)p % 4096 == 0);
    free(p);

    volatile size_t odd = 24, zero = 0;
    PTR("aligned_alloc align24", aligned_alloc(odd, 48));
    PTR("aligned_alloc align0", aligned_alloc(zero, 48));
    PTR("aligned_alloc huge", aligned_alloc(64, huge));
    p = aligned_alloc(256, 10);
    printf("aligned_alloc 256: aligned=%d\n", p && (uintptr_t)p % 256 == 0);
    free(p);

    p = memalign(odd, 48); /* glibc rounds 24 up to 32 */
    printf("memalign align24: %s aligned32=%d\n", p ? "ptr" : "NULL", p && (uintptr_t)p % 32 == 0);
    free(p);
    PTR("memalign huge", memalign(64, huge));

    p = valloc(10);
    printf("valloc 10: aligned=%d\n", p && (uintptr_t)p % (uintptr_t)page == 0);
    free(p);
    PTR("valloc huge", valloc(huge));
    p = pvalloc(10);
    printf("pvalloc 10: aligned=%d whole_page=%d\n", p && (uintptr_t)p % (uintptr_t)page == 0,
           p && malloc_usable_size(p) >= (size_t)page);
    free(p);
    PTR("pvalloc size_max", pvalloc(max));

    printf("malloc_usable_size null: %zu\n", malloc_usable_size(NULL));
    p = malloc(100);
    printf("malloc_usable_size 100: %d\n", malloc_usable_size(p) >= 100);
    free(p);
    errno = 42;
    free(NULL);
    printf("free null: errno_kept=%d\n", errno == 42);

    /* Who serves each member (the program's own view of the symbol). */
    printf("owner malloc: %s\n", owner((uintptr_t)&malloc));
    printf("owner free: %s\n", owner((uintptr_t)&free));
    printf("owner calloc: %s\n", owner((uintptr_t)&calloc));
    printf("owner realloc: %s\n", owner((uintptr_t)&realloc));
    printf("owner reallocarray: %s\n", owner((uintptr_t)&reallocarray));
    printf("owner posix_memalign: %s\n", owner((uintptr_t)&posix_memalign));
    printf("owner aligned_alloc: %s\n", owner((uintptr_t)&aligned_alloc));
    printf("owner memalign: %s\n", owner((uintptr_t)&memalign));
    printf("owner valloc: %s\n", owner((uintptr_t)&valloc));
    printf("owner pvalloc: %s\n", owner((uintptr_t)&pvalloc));
    printf("owner malloc_usable_size: %s\n", owner((uintptr_t)&malloc_usable_size));
    return 0;
}
