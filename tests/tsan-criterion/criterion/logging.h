/* SPDX-License-Identifier: MIT */
/* Part of the TSan stand-in for Criterion: logging lives in criterion.h. */
#include <criterion/criterion.h>
