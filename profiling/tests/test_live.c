/* SPDX-License-Identifier: MIT */
/* The live table alone, under threads: eight threads insert and remove
 * pointers interleaved on the same pages (so the same stripes, filter
 * words and often the same filter slots), through growth, backward-shift
 * deletion, stale entries replaced in place and removals by identity;
 * every pointer's entry, identity and filter bit is checked as it goes,
 * and at the end the table and the filter are empty. */
#include "helpers.h"

#include <stdatomic.h>

#include "internal.h"

enum { THREADS = 8 };
#define PER    (TEST_SANITIZED ? 512 : 4096) /* pointers a thread (prime to 7) */
#define ROUNDS (TEST_SANITIZED ? 4 : 16)
#define BASE   ((uintptr_t)0x7e5a00000000) /* never dereferenced */
#define STACK  ((const mp_stack *)(uintptr_t)0x1000)

static _Atomic unsigned g_bad; /* failed checks (criterion asserts stay on the main thread) */

static uintptr_t ptr_of(unsigned t, unsigned i) { return BASE + ((uintptr_t)i * THREADS + t) * 16; }

static void check(bool ok)
{
    if (!ok)
        atomic_fetch_add(&g_bad, 1);
}

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    static _Thread_local uint64_t id[4096];
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (unsigned i = 0; i < PER; i++) {
            uintptr_t p = ptr_of(t, i);
            check(mp_live_insert(p, STACK, 64 + i, 1.0, 1, 0));
            id[i] = mp_live_id(p);
            check(id[i] != 0);
            check(mp_prof_hook_maybe_sampled((void *)p));
        }
        /* a free we could not see: the same pointer sampled again replaces
         * its entry (new identity); a removal by the old one is a no-op */
        for (unsigned i = 0; i < PER; i += 7) {
            uintptr_t p = ptr_of(t, i);
            check(mp_live_insert(p, STACK, 32, 2.0, 1, 0));
            uint64_t now = mp_live_id(p);
            check(now != 0 && now != id[i]);
            mp_live_remove(p, id[i]);
            check(mp_live_id(p) == now);
            id[i] = now;
        }
        /* removals in another order (7 is prime to PER), by identity or not */
        for (unsigned k = 0; k < PER; k++) {
            unsigned i = (k * 7 + 3) % PER;
            uintptr_t p = ptr_of(t, i);
            mp_live_remove(p, k & 1 ? id[i] : 0);
            check(mp_live_id(p) == 0);
        }
    }
    return NULL;
}

Test(live, threads_on_shared_stripes, .timeout = 120)
{
    mp_live_clear();
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    cr_assert_eq(atomic_load(&g_bad), 0, "%u checks failed", atomic_load(&g_bad));
    cr_assert_eq(mp_live_count(), 0);
    /* every filter slot's count went back to zero: no bit or page left */
    for (unsigned t = 0; t < THREADS; t++)
        for (unsigned i = 0; i < PER; i++)
            cr_assert(!mp_prof_hook_maybe_sampled((void *)ptr_of(t, i)), "bit of %u/%u left", t, i);
    mp_live_clear();
}

/* free(NULL) shares a filter slot with blocks at 16 MiB boundaries: it
 * never removes, and never finds, anything. */
Test(live, null_is_never_an_entry, .timeout = 60)
{
    mp_live_clear();
    uintptr_t p = (uintptr_t)1 << 24;
    cr_assert(mp_live_insert(p, STACK, 64, 1.0, 1, 0));
    cr_assert_eq(mp_live_id(0), 0);
    mp_live_remove(0, 0);
    cr_assert_neq(mp_live_id(p), 0);
    cr_assert_eq(mp_live_count(), 1);
    mp_live_remove(p, 0);
    cr_assert_eq(mp_live_count(), 0);
    cr_assert(!mp_prof_hook_maybe_sampled((void *)p));
    mp_live_clear();
}
