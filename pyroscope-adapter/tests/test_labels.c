/* SPDX-License-Identifier: MIT */
/* Pyroscope's naming rules, checked when a value is set. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "labels.h"

static char err[512];

Test(labels, app_name)
{
    cr_expect_eq(mp_pyro_check_app_name("my.app-1/svc_2", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_app_name("", err, sizeof err), MP_PYRO_E_INVALID_NAME);
    cr_expect_eq(mp_pyro_check_app_name("app name", err, sizeof err), MP_PYRO_E_INVALID_NAME);
    cr_expect(strstr(err, "character 3"), "%s", err);
    cr_expect_eq(mp_pyro_check_app_name("app{x=y}", err, sizeof err), MP_PYRO_E_INVALID_NAME);
    char long_name[1026];
    memset(long_name, 'a', 1025);
    long_name[1025] = 0;
    cr_expect_eq(mp_pyro_check_app_name(long_name, err, sizeof err), MP_PYRO_E_INVALID_NAME);
    long_name[1024] = 0;
    cr_expect_eq(mp_pyro_check_app_name(long_name, err, sizeof err), MP_PYRO_OK);
}

Test(labels, label_names)
{
    cr_expect_eq(mp_pyro_check_label_name("env", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_name("k8s_pod_name", err, sizeof err), MP_PYRO_OK);
    /* 1.13 stores '.' as '_' (2.0 keeps it) and refuses a leading digit */
    cr_expect_eq(mp_pyro_check_label_name("k8s.pod_name", err, sizeof err),
                 MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(err, "use '_'"), "%s", err);
    cr_expect_eq(mp_pyro_check_label_name("1az", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(err, "starts with a digit"), "%s", err);
    cr_expect_eq(mp_pyro_check_label_name("_1az", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_name("az1", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_name("_x", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_name("__name__", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(err, "reserves"), "%s", err);
    cr_expect_eq(mp_pyro_check_label_name("service_name", err, sizeof err),
                 MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_name("a-b", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_name("a b", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_name("", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
}

Test(labels, label_values)
{
    cr_expect_eq(mp_pyro_check_label_value("k", "v=1{x", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_value("k", "caf\xc3\xa9", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_label_value("k", "a,b", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(err, "','"), "%s", err);
    cr_expect_eq(mp_pyro_check_label_value("k", "a}b", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_value("k", "", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_value("k", " v", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_value("k", "v\n", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_value("k", "\xc3\x28", err, sizeof err),
                 MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(mp_pyro_check_label_value("k", "\xed\xa0\x80", err, sizeof err),
                 MP_PYRO_E_INVALID_LABEL);
    char v[2050];
    memset(v, 'x', 2049);
    v[2049] = 0;
    cr_expect_eq(mp_pyro_check_label_value("k", v, err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    v[2048] = 0;
    cr_expect_eq(mp_pyro_check_label_value("k", v, err, sizeof err), MP_PYRO_OK);
}

Test(labels, series_name_sorted_and_limits)
{
    mp_pyro_series s = {0};
    s.app = strdup("app");
    cr_assert_eq(mp_pyro_series_add_tags(&s, " zone = eu , env=prod ,", err, sizeof err),
                 MP_PYRO_OK, "%s", err);
    cr_assert_eq(mp_pyro_series_add_tag(&s, "b", "2", err, sizeof err), MP_PYRO_OK);
    mp_pyro_buf out = {0};
    mp_pyro_series_name(&s, &out);
    cr_expect_str_eq(mp_pyro_buf_cstr(&out), "app{b=2,env=prod,zone=eu}");
    mp_pyro_buf_free(&out);
    /* all or nothing */
    cr_expect_eq(mp_pyro_series_add_tags(&s, "c=3,bad-key=1", err, sizeof err),
                 MP_PYRO_E_INVALID_LABEL);
    cr_expect_eq(s.ntags, 3);
    cr_expect_eq(mp_pyro_series_add_tags(&s, "env=dup", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    cr_expect(strstr(err, "twice"), "%s", err);
    cr_expect_eq(mp_pyro_series_add_tags(&s, "novalue", err, sizeof err), MP_PYRO_E_INVALID_LABEL);
    char k[16];
    for (int i = 3; i < MP_PYRO_MAX_TAGS; i++) {
        snprintf(k, sizeof k, "t%02d", i);
        cr_assert_eq(mp_pyro_series_add_tag(&s, k, "v", err, sizeof err), MP_PYRO_OK);
    }
    cr_expect_eq(mp_pyro_series_add_tag(&s, "one_more", "v", err, sizeof err),
                 MP_PYRO_E_TOO_MANY_LABELS);
    mp_pyro_series_clear(&s);
}

Test(labels, tenant_and_headers)
{
    cr_expect_eq(mp_pyro_check_tenant("team-a_1.(x)", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_tenant("a/b", err, sizeof err), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_check_tenant("..", err, sizeof err), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_check_header("X-Env", "v 1", err, sizeof err), MP_PYRO_OK);
    cr_expect_eq(mp_pyro_check_header("authorization", "x", err, sizeof err),
                 MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_check_header("X-Scope-OrgID", "x", err, sizeof err),
                 MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_check_header("Bad Name", "x", err, sizeof err), MP_PYRO_E_INVALID_CONFIG);
    cr_expect_eq(mp_pyro_check_header("X-A", "a\r\nX-Injected: 1", err, sizeof err),
                 MP_PYRO_E_INVALID_CONFIG);
}
