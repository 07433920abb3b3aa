/* SPDX-License-Identifier: MIT */
/* The heap: allocation by shape, hidden header, exact membership, roots by
 * name, and a trace flag of its own that never disturbs the user's flags. */
#include "fixture.h"

#include "internal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

static struct fx f;
static mp_img_heap *h;

static void setup(void)
{
    fx_init(&f, 2);
    cr_assert_eq(mp_img_heap_new(f.reg, &h, NULL), MP_IMG_OK);
}

static void teardown(void)
{
    mp_img_heap_free(h);
    fx_free(&f);
}

TestSuite(heap, .init = setup, .fini = teardown);

Test(heap, alloc_follows_the_shape)
{
    mp_img_word *n = mp_img_alloc(h, f.node, 2);
    cr_assert_not_null(n);
    cr_assert_eq(n[0], 0);
    cr_assert_eq(n[1], 0);
    cr_assert_eq(mp_img_type_of(h, n), f.node);
    cr_assert_eq(mp_img_units(n), 2);
    errno = 0;
    cr_assert_null(mp_img_alloc(h, f.node, 3));
    cr_assert_eq(errno, EINVAL);
    cr_assert_null(mp_img_alloc(h, f.vec, 0));
    mp_img_word *v = mp_img_alloc(h, f.vec, 6);
    cr_assert_eq(v[0], 5, "the slot-0 count is set by alloc");
    cr_assert_not_null(mp_img_alloc(h, f.blob, 7), "shapeless types allocate any count");
    struct fx other;
    fx_init(&other, 0);
    errno = 0;
    cr_assert_null(mp_img_alloc(h, other.node, 2), "a type of another registry");
    cr_assert_eq(errno, EINVAL);
    fx_free(&other);
    cr_assert_eq(mp_img_heap_count(h), 3);
}

Test(heap, flags_and_metadata)
{
    mp_img_word *n = mp_img_alloc(h, f.leaf, 1);
    cr_assert_eq(mp_img_flags(n), 0);
    mp_img_set_flags(n, 0xF8000u | 0x3EEF);
    cr_assert_eq(mp_img_flags(n), 0x3EEF);
    mp_img_word *m = mp_img_meta(h, n);
    cr_assert_not_null(m);
    cr_assert_eq(m[0], 0);
    cr_assert_eq(m[1], 0);
    m[0] = 11;
    m[1] = 22;
    cr_assert_eq(mp_img_type_of(h, n), f.leaf, "metadata does not overlap the header");
}

Test(heap, membership_is_exact)
{
    mp_img_word *a = mp_img_alloc(h, f.node, 2);
    cr_assert(mp_img_heap_contains(h, a));
    cr_assert_not(mp_img_heap_contains(h, a + 1), "an interior pointer is not an object");
    cr_assert_not(mp_img_heap_contains(h, (char *)a + 3));
    cr_assert_not(mp_img_heap_contains(h, NULL));
    void *m = malloc(16);
    cr_assert_not(mp_img_heap_contains(h, m));
    free(m);
    mp_img_heap *other;
    mp_img_heap_new(f.reg, &other, NULL);
    mp_img_word *b = mp_img_alloc(other, f.node, 2);
    cr_assert_not(mp_img_heap_contains(h, b), "another heap's object is not on this heap");
    mp_img_heap_free(other);
    /* Many chunks: every object stays findable. */
    void **all = malloc(100000 * sizeof *all);
    for (int i = 0; i < 100000; i++)
        all[i] = mp_img_alloc(h, f.vec, 1 + (size_t)(i % 7));
    for (int i = 0; i < 100000; i++)
        cr_assert(mp_img_heap_contains(h, all[i]));
    free(all);
}

Test(heap, roots_by_name)
{
    mp_img_word *a = mp_img_alloc(h, f.leaf, 1), *b = mp_img_alloc(h, f.leaf, 1);
    cr_assert_eq(mp_img_root_set(h, "zeta", a, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, "alpha", b, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, "nil", NULL, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_get(h, "zeta"), a);
    cr_assert_eq(mp_img_root_get(h, "alpha"), b);
    void *v = (void *)1;
    cr_assert(mp_img_root_find(h, "nil", &v));
    cr_assert_null(v);
    cr_assert_not(mp_img_root_find(h, "absent", NULL));
    cr_assert_eq(mp_img_root_count(h), 3);
    cr_assert_str_eq(mp_img_root_at(h, 0, NULL), "alpha");
    cr_assert_str_eq(mp_img_root_at(h, 2, NULL), "zeta");
    cr_assert_eq(mp_img_root_set(h, "zeta", b, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_get(h, "zeta"), b);
    cr_assert_eq(mp_img_root_count(h), 3);
    cr_assert_eq(mp_img_root_set(h, "", a, NULL), MP_IMG_E_ARGUMENT);
}

static void no_trace_flag(void *obj, void *ctx)
{
    (void)ctx;
    cr_assert_eq(img_hdr(obj)->flags & IMG_TRACED, 0);
}

Test(heap, reachability_uses_its_own_flag)
{
    mp_img_word *a = mp_img_alloc(h, f.node, 2), *b = mp_img_alloc(h, f.node, 2);
    mp_img_word *garbage = mp_img_alloc(h, f.node, 2);
    a[0] = (mp_img_word)b;
    b[1] = (mp_img_word)a; /* a cycle */
    garbage[0] = (mp_img_word)a;
    mp_img_set_flags(a, 0x7FFF);
    mp_img_set_flags(b, 0x0001);
    mp_img_root_set(h, "a", a, NULL);
    size_t n = 0;
    cr_assert_eq(mp_img_heap_reachable(h, &n, NULL), MP_IMG_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(mp_img_flags(a), 0x7FFF, "user flags are untouched");
    cr_assert_eq(mp_img_flags(b), 0x0001);
    img_chain_walk(h, no_trace_flag, NULL);
    /* The trace after a refusal is cleared as well. */
    b[0] = (mp_img_word)(a + 1);
    mp_img_error err;
    cr_assert_eq(mp_img_heap_reachable(h, &n, &err), MP_IMG_E_NOT_ON_HEAP);
    img_chain_walk(h, no_trace_flag, NULL);
}
