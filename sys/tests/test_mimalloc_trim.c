/* SPDX-License-Identifier: MIT */
/* mp_sys_mimalloc_trim_thread: the pages a thread's heap holds free go
 * back to the OS (resident memory falls), where mimalloc's own forced
 * collection keeps them while the segment has a live block (the
 * reporter thread's case: what its reports keep, e.g. the mappings); the
 * decommit delay is the same afterwards. Each Criterion test runs in a
 * process of its own. */
#include <criterion/criterion.h>
#include <mimprof/sys.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { BLOCKS = 4096, BLOCK = 1000 };

static void *blocks[BLOCKS];

static long resident_kib(void)
{
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%ld %ld", &size, &res), 2);
    fclose(f);
    return res * 4;
}

/* ~4 MiB allocated and written, then freed, with one block kept live in
 * the same heap. Returns the resident KiB after the frees. */
static long churn(void **pin)
{
    *pin = mi_malloc(64);
    cr_assert_not_null(*pin);
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = mi_malloc(BLOCK);
        cr_assert_not_null(blocks[i]);
        memset(blocks[i], 0x5a, BLOCK);
    }
    for (int i = 0; i < BLOCKS; i++)
        mi_free(blocks[i]);
    return resident_kib();
}

/* In a thread of its own, as the reporter: returns the KiB given back. */
static void *run(void *trim)
{
    void *pin;
    long before = churn(&pin);
    if (trim != NULL)
        mp_sys_mimalloc_trim_thread();
    else
        mi_collect(true);
    long after = resident_kib();
    mi_free(pin);
    return (void *)(intptr_t)(before - after);
}

static long given_back(bool trim)
{
    pthread_t t;
    void *r;
    cr_assert_eq(pthread_create(&t, NULL, run, trim ? (void *)1 : NULL), 0);
    cr_assert_eq(pthread_join(t, &r), 0);
    return (long)(intptr_t)r;
}

Test(mimalloc_trim, a_forced_collect_keeps_the_pages)
{
    long kib = given_back(false);
    cr_assert_lt(kib, 1024, "mimalloc's collection gave %ld KiB back: the trim may be unneeded",
                 kib);
}

Test(mimalloc_trim, the_trim_gives_them_back)
{
    long delay = mi_option_get(mi_option_decommit_delay);
    long kib = given_back(true);
    cr_assert_gt(kib, 2048, "%ld KiB given back", kib);
    cr_assert_eq(mi_option_get(mi_option_decommit_delay), delay);
}
