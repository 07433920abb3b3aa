/* SPDX-License-Identifier: MIT */
/* A provider's identity functions. Its allocation behaviour is covered by
 * the shared contract suite (tests/contracts in the workspace). */
#include <criterion/criterion.h>
#include <mimprof/sys.h>
#include <string.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b)  CAT2(a, b)
#define P(op)      CAT(PROVIDER, op)

Test(provider, name) { cr_assert_str_eq(P(name)(), PROVIDER_NAME); }

Test(provider, native_version_is_dotted)
{
    char buf[MP_SYS_VERSION_LEN];
    const char *v = P(version)(buf);
    cr_assert_eq(v, buf);
    cr_assert(strchr(v, '.') != NULL, "version '%s'", v);
    cr_assert(v[0] >= '1' && v[0] <= '9', "version '%s'", v);
}

Test(provider, alloc_free_roundtrip)
{
    char *p = P(alloc)(100, 64);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 64, 0);
    memset(p, 0xab, 100);
    cr_assert_geq(P(usable_size)(p), 100);
    P(dealloc)(p, 100, 64);
}

/* The statistics hook sees memory the program holds: 64 MiB held (and
 * written) raises the figure the provider gives, and what it does not
 * give stays MP_SYS_STAT_NONE. */
Test(provider, stats_hook_sees_held_memory)
{
    mp_sys_stats before, after;
    cr_assert(P(stats)(&before));
    enum { N = 64 };
    char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = P(alloc)((size_t)1 << 20, 16);
        cr_assert_not_null(blocks[i]);
        memset(blocks[i], 1, (size_t)1 << 20);
    }
    cr_assert(P(stats)(&after));
    /* mimalloc: committed; jemalloc: allocated, active, resident, mapped. */
    unsigned long long b =
        before.committed != MP_SYS_STAT_NONE ? before.committed : before.allocated;
    unsigned long long a = after.committed != MP_SYS_STAT_NONE ? after.committed : after.allocated;
    cr_assert_neq(a, MP_SYS_STAT_NONE);
    cr_assert_geq(a, b + ((unsigned long long)N << 20) - ((unsigned long long)1 << 20),
                  "before %llu after %llu", b, a);
    if (after.resident != MP_SYS_STAT_NONE)
        cr_assert_geq(after.resident, (unsigned long long)N << 20);
    /* mimalloc's reserved address space (rounded to three significant
     * digits) holds what it committed; jemalloc gives none */
    if (after.committed != MP_SYS_STAT_NONE) {
        cr_assert_neq(after.reserved, MP_SYS_STAT_NONE, "mimalloc's reserved line was read");
        cr_assert_geq(after.reserved + after.reserved / 200, after.committed,
                      "reserved %llu committed %llu", after.reserved, after.committed);
    } else {
        cr_assert_eq(after.reserved, MP_SYS_STAT_NONE);
    }
    for (int i = 0; i < N; i++)
        P(dealloc)(blocks[i], (size_t)1 << 20, 16);
}
