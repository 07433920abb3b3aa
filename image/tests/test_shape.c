/* SPDX-License-Identifier: MIT */
/* Shapes: the readable spelling compiles to count + mask; units past the
 * mask take the last kind; a zero mask means all references; registration
 * refuses what it cannot keep. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <string.h>

static mp_img_shape parse(const char *s)
{
    mp_img_shape sh;
    mp_img_error err;
    cr_assert_eq(mp_img_shape_parse(s, &sh, &err), MP_IMG_OK, "%s: %s", s, err.detail);
    return sh;
}

Test(shape, spelling_compiles_to_count_and_mask)
{
    mp_img_shape s = parse("word ref bytes");
    cr_assert_eq(s.count, 3);
    cr_assert_eq(s.described, 3);
    cr_assert_not(s.dynamic);
    cr_assert_eq(s.mask, 1u | (0u << 2) | (2u << 4));
    cr_assert_eq(mp_img_shape_kind(&s, 0), MP_IMG_WORD);
    cr_assert_eq(mp_img_shape_kind(&s, 1), MP_IMG_REF);
    cr_assert_eq(mp_img_shape_kind(&s, 2), MP_IMG_BYTES);
}

Test(shape, units_past_the_mask_take_the_last_kind)
{
    mp_img_shape s = parse("6: word foreign");
    cr_assert_eq(s.count, 6);
    for (size_t u = 1; u < 6; u++)
        cr_assert_eq(mp_img_shape_kind(&s, u), MP_IMG_FOREIGN);
    mp_img_shape d = parse("*: word ref");
    cr_assert(d.dynamic);
    cr_assert_eq(mp_img_shape_kind(&d, 0), MP_IMG_WORD);
    cr_assert_eq(mp_img_shape_kind(&d, 1000), MP_IMG_REF);
}

Test(shape, zero_mask_means_all_references)
{
    mp_img_shape s = {false, 4, 3, 0};
    for (size_t u = 0; u < 4; u++)
        cr_assert_eq(mp_img_shape_kind(&s, u), MP_IMG_REF);
    mp_img_shape r = parse("ref ref");
    cr_assert_eq(r.mask, 0);
    cr_assert_eq(r.count, 2);
}

Test(shape, empty_spellings_are_zero_units)
{
    cr_assert_eq(parse("").count, 0);
    cr_assert_eq(parse("0:").count, 0);
}

Test(shape, bad_spellings_are_refused)
{
    const char *bad[] = {"wrod",   "*: ref word", "*:",     "2: word ref bytes",
                         "x: ref", "ref,ref",     "-1: ref"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mp_img_shape s;
        mp_img_error err;
        cr_assert_eq(mp_img_shape_parse(bad[i], &s, &err), MP_IMG_E_ARGUMENT, "%s", bad[i]);
        cr_assert_neq(err.detail[0], '\0');
    }
    char many[400] = "";
    for (int i = 0; i < 33; i++)
        strcat(many, "word ");
    mp_img_shape s;
    cr_assert_eq(mp_img_shape_parse(many, &s, NULL), MP_IMG_E_ARGUMENT);
}

Test(shape, format_round_trips)
{
    const char *spellings[] = {"word ref bytes", "*: word ref", "6: word foreign", "2: ref",
                               "word",           "bytes",       "foreign ref"};
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        mp_img_shape a = parse(spellings[i]);
        char buf[128];
        mp_img_shape_format(&a, buf, sizeof buf);
        mp_img_shape b = parse(buf);
        for (size_t u = 0; u < 40; u++)
            cr_assert_eq(mp_img_shape_kind(&a, u), mp_img_shape_kind(&b, u), "%s", buf);
        cr_assert_eq(a.count, b.count);
        cr_assert_eq(a.dynamic, b.dynamic);
    }
}

Test(shape, registration_refusals)
{
    mp_img_registry *reg;
    cr_assert_eq(mp_img_registry_new(0, &reg, NULL), MP_IMG_OK);
    mp_img_error err;
    mp_img_shape sh = {false, 1, 1, MP_IMG_WORD};
    /* bytes without a length function */
    cr_assert_eq(mp_img_type_register(reg, "s", &(mp_img_type_options){.spelling = "word bytes"},
                                      NULL, &err),
                 MP_IMG_E_ARGUMENT);
    cr_assert_str_eq(err.detail, "type 's' has bytes units but no bytes_length function");
    /* two shape declarations */
    cr_assert_eq(mp_img_type_register(reg, "t",
                                      &(mp_img_type_options){.spelling = "word", .shape = &sh},
                                      NULL, &err),
                 MP_IMG_E_ARGUMENT);
    /* callbacks policy without callbacks */
    cr_assert_eq(mp_img_type_register(reg, "u",
                                      &(mp_img_type_options){.spelling = "foreign",
                                                             .foreign = MP_IMG_FOREIGN_CALLBACKS},
                                      NULL, &err),
                 MP_IMG_E_ARGUMENT);
    /* a dynamic shape whose unit 0 is a reference */
    mp_img_shape dyn = {true, 0, 0, 0};
    cr_assert_eq(mp_img_type_register(reg, "v", &(mp_img_type_options){.shape = &dyn}, NULL, &err),
                 MP_IMG_E_ARGUMENT);
    /* names */
    cr_assert_eq(mp_img_type_register(reg, "", NULL, NULL, &err), MP_IMG_E_ARGUMENT);
    cr_assert_eq(mp_img_type_register(reg, "w", NULL, NULL, &err), MP_IMG_OK);
    cr_assert_eq(mp_img_type_register(reg, "w", NULL, NULL, &err), MP_IMG_E_ARGUMENT);
    cr_assert_str_eq(err.detail, "type 'w' is already registered");
    const mp_img_type *w = mp_img_type_find(reg, "w");
    cr_assert_not_null(w);
    cr_assert_not(mp_img_type_shape(w, NULL)); /* shapeless */
    mp_img_registry_free(reg);
}

Test(shape, equivalent_shapes_register_identically)
{
    /* "word ref ref" and "3: word ref" are one shape: one canonical form,
     * so they give one type table digest. */
    mp_img_registry *a, *b;
    mp_img_registry_new(0, &a, NULL);
    mp_img_registry_new(0, &b, NULL);
    const mp_img_type *ta, *tb;
    mp_img_type_register(a, "t", &(mp_img_type_options){.spelling = "word ref ref"}, &ta, NULL);
    mp_img_type_register(b, "t", &(mp_img_type_options){.spelling = "3: word ref"}, &tb, NULL);
    mp_img_shape sa, sb;
    cr_assert(mp_img_type_shape(ta, &sa));
    cr_assert(mp_img_type_shape(tb, &sb));
    cr_assert(sa.dynamic == sb.dynamic && sa.count == sb.count && sa.described == sb.described &&
              sa.mask == sb.mask);
    mp_img_registry_free(a);
    mp_img_registry_free(b);
}
