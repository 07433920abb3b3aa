/* SPDX-License-Identifier: MIT */
/* Preloaded after the override, this library proves who served a foreign
 * program's allocations: at exit it asks mimalloc whether a block from
 * malloc() is in its heap and how much memory mimalloc committed at its
 * peak, and writes that to the file named by MIMPROF_CHECK_OUT. */
#define _GNU_SOURCE
#include <malloc.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((destructor)) static void report_mimalloc_use(void)
{
    const char *path = getenv("MIMPROF_CHECK_OUT");
    if (path == NULL)
        return;
    void *probe = malloc(100);
    int in_heap = mi_is_in_heap_region(probe);
    int sizes_agree = malloc_usable_size(probe) == mi_usable_size(probe);
    free(probe);
    size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
    mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    fprintf(f, "in_heap=%d sizes_agree=%d peak_commit=%zu\n", in_heap, sizes_agree, peak_commit);
    fclose(f);
}
