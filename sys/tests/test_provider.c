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
