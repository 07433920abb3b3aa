/* SPDX-License-Identifier: MIT */
/* The allocator-only consumer of a release (release.py consumer-test):
 * links mimprof-allocator and nothing of the profiler, and uses it. */
#include <mimprof/allocator.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    for (size_t align = 1; align <= 4096; align <<= 1) {
        unsigned char *p = mp_alloc_alloc(100, align);
        if (p == NULL || (uintptr_t)p % align != 0 || mp_alloc_usable_size(p) < 100) {
            fprintf(stderr, "mp_alloc_alloc(100, %zu) = %p\n", align, (void *)p);
            return 1;
        }
        memset(p, 0xab, 100);
        p = mp_alloc_realloc(p, 100, align, 5000);
        if (p == NULL || p[99] != 0xab) {
            fprintf(stderr, "mp_alloc_realloc lost the contents\n");
            return 1;
        }
        mp_alloc_dealloc(p, 5000, align);
    }
    printf("mimprof-allocator %s over %s: ok\n", mp_alloc_version(), mp_alloc_provider_name());
    return 0;
}
