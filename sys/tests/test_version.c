/* SPDX-License-Identifier: MIT */
/* libmimprof-sys reports the package version the build was configured with. */
#include <criterion/criterion.h>
#include <mimprof/sys.h>

Test(sys, package_version_is_set) { cr_assert_str_eq(mp_sys_version(), MESON_VERSION); }
