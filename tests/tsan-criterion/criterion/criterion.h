/* SPDX-License-Identifier: MIT */
/* A stand-in for the subset of Criterion 2.4 that mimprof's tests use, for
 * the ThreadSanitizer tree only: Criterion cannot start under TSan (its
 * boxfort arena fails, Snaipe/Criterion#274). `./dev` builds this as
 * libcriterion.a with a criterion.pc, so every package's
 * dependency('criterion') transparently picks it up there.
 *
 * Semantics kept: every test runs in its own forked process (a crash or
 * failed assertion fails that test only), suite and test init/fini run
 * around it, .timeout is enforced, the closing line has Criterion's
 * "Synthesis" form, and the exit status is non-zero on any failure.
 * Supported: Test, TestSuite, cr_assert*, cr_expect*, cr_fail, cr_skip_test,
 * cr_log_info/warn/error. Anything else fails to compile, on purpose. */
#ifndef MIMPROF_TSAN_CRITERION_H
#define MIMPROF_TSAN_CRITERION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct criterion_test_extra_data {
    int sentinel_;
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    int exit_code;
    int signal;
    bool disabled;
    const char *description;
};

void mpcr_register_test(const char *suite, const char *name, void (*fn)(void),
                        struct criterion_test_extra_data extra);
void mpcr_register_suite(const char *suite, struct criterion_test_extra_data extra);
void mpcr_fail(const char *file, int line, int fatal, const char *text, const char *fmt, ...);
void mpcr_skip(const char *fmt, ...);
void mpcr_log(const char *level, const char *fmt, ...);

#define MPCR_ID_(a, b, c) mpcr_##a##_##b##_##c

#define Test(suite, name, ...)                                                                     \
    static void MPCR_ID_(fn, suite, name)(void);                                                   \
    __attribute__((constructor)) static void MPCR_ID_(reg, suite, name)(void)                      \
    {                                                                                              \
        mpcr_register_test(#suite, #name, MPCR_ID_(fn, suite, name),                               \
                           (struct criterion_test_extra_data){.sentinel_ = 0, __VA_ARGS__});       \
    }                                                                                              \
    static void MPCR_ID_(fn, suite, name)(void)

#define TestSuite(suite, ...)                                                                      \
    __attribute__((constructor)) static void MPCR_ID_(sreg, suite, x)(void)                        \
    {                                                                                              \
        mpcr_register_suite(#suite,                                                                \
                            (struct criterion_test_extra_data){.sentinel_ = 0, __VA_ARGS__});      \
    }                                                                                              \
    struct mpcr_suite_##suite##_unused_

/* Assertion core. Every macro takes the operands, then an optional
 * printf-style message; a trailing "" is appended so that the message part
 * is never empty (ISO C wants at least one argument for "..."). */
#define MPCR_FIRST_(a, ...) a
#define MPCR_REST_(a, ...)  __VA_ARGS__
#define MPCR_CHECK_(fatal, cond, text, ...)                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            mpcr_fail(__FILE__, __LINE__, fatal, text, __VA_ARGS__);                               \
    } while (0)

#define MPCR_UNARY_(fatal, neg, ...)                                                               \
    MPCR_CHECK_(fatal, neg !!(MPCR_FIRST_(__VA_ARGS__, 0)), #neg "(" #__VA_ARGS__ ")",             \
                "" MPCR_REST_(__VA_ARGS__, ""))
#define cr_assert(...)      MPCR_UNARY_(1, , __VA_ARGS__)
#define cr_expect(...)      MPCR_UNARY_(0, , __VA_ARGS__)
#define cr_assert_not(...)  MPCR_UNARY_(1, !, __VA_ARGS__)
#define cr_expect_not(...)  MPCR_UNARY_(0, !, __VA_ARGS__)
#define cr_fail(...)        mpcr_fail(__FILE__, __LINE__, 1, "cr_fail", "" __VA_ARGS__)
#define cr_assert_fail(...) mpcr_fail(__FILE__, __LINE__, 1, "cr_assert_fail", "" __VA_ARGS__)
#define cr_expect_fail(...) mpcr_fail(__FILE__, __LINE__, 0, "cr_expect_fail", "" __VA_ARGS__)
#define cr_skip_test(...)   mpcr_skip("" __VA_ARGS__)

/* Binary comparisons: (a, b [, fmt, args...]). */
#define MPCR_CMP_(fatal, op, a, b, ...)                                                            \
    MPCR_CHECK_(fatal, (a)op(b), #a " " #op " " #b, "" __VA_ARGS__)
#define cr_assert_eq(...)  MPCR_CMP_(1, ==, __VA_ARGS__, "")
#define cr_assert_neq(...) MPCR_CMP_(1, !=, __VA_ARGS__, "")
#define cr_assert_lt(...)  MPCR_CMP_(1, <, __VA_ARGS__, "")
#define cr_assert_leq(...) MPCR_CMP_(1, <=, __VA_ARGS__, "")
#define cr_assert_gt(...)  MPCR_CMP_(1, >, __VA_ARGS__, "")
#define cr_assert_geq(...) MPCR_CMP_(1, >=, __VA_ARGS__, "")
#define cr_expect_eq(...)  MPCR_CMP_(0, ==, __VA_ARGS__, "")
#define cr_expect_neq(...) MPCR_CMP_(0, !=, __VA_ARGS__, "")
#define cr_expect_lt(...)  MPCR_CMP_(0, <, __VA_ARGS__, "")
#define cr_expect_leq(...) MPCR_CMP_(0, <=, __VA_ARGS__, "")
#define cr_expect_gt(...)  MPCR_CMP_(0, >, __VA_ARGS__, "")
#define cr_expect_geq(...) MPCR_CMP_(0, >=, __VA_ARGS__, "")

#define MPCR_PTR_(fatal, op, p, ...)                                                               \
    MPCR_CHECK_(fatal, (p)op NULL, #p " " #op " NULL", "" __VA_ARGS__)
#define cr_assert_null(...)     MPCR_PTR_(1, ==, __VA_ARGS__, "")
#define cr_assert_not_null(...) MPCR_PTR_(1, !=, __VA_ARGS__, "")
#define cr_expect_null(...)     MPCR_PTR_(0, ==, __VA_ARGS__, "")
#define cr_expect_not_null(...) MPCR_PTR_(0, !=, __VA_ARGS__, "")

#define MPCR_STR_(fatal, op, a, b, ...)                                                            \
    MPCR_CHECK_(fatal, strcmp((a), (b)) op 0, #a " " #op " " #b, "" __VA_ARGS__)
#define cr_assert_str_eq(...)  MPCR_STR_(1, ==, __VA_ARGS__, "")
#define cr_assert_str_neq(...) MPCR_STR_(1, !=, __VA_ARGS__, "")
#define cr_expect_str_eq(...)  MPCR_STR_(0, ==, __VA_ARGS__, "")
#define cr_expect_str_neq(...) MPCR_STR_(0, !=, __VA_ARGS__, "")
#define MPCR_EMPTY_(fatal, op, a, ...)                                                             \
    MPCR_CHECK_(fatal, (a)[0] op '\0', #a " " #op " \"\"", "" __VA_ARGS__)
#define cr_assert_str_empty(...)     MPCR_EMPTY_(1, ==, __VA_ARGS__, "")
#define cr_assert_str_not_empty(...) MPCR_EMPTY_(1, !=, __VA_ARGS__, "")
#define MPCR_ARR_(fatal, a, b, n, ...)                                                             \
    MPCR_CHECK_(fatal, memcmp((a), (b), (n)) == 0, #a " == " #b, "" __VA_ARGS__)
#define cr_assert_arr_eq(...) MPCR_ARR_(1, __VA_ARGS__, "")
#define cr_expect_arr_eq(...) MPCR_ARR_(0, __VA_ARGS__, "")
#define MPCR_FLT_(fatal, a, b, eps, ...)                                                           \
    MPCR_CHECK_(fatal, ((a) - (b) <= (eps)) && ((b) - (a) <= (eps)), #a " ~= " #b, "" __VA_ARGS__)
#define cr_assert_float_eq(...) MPCR_FLT_(1, __VA_ARGS__, "")
#define cr_expect_float_eq(...) MPCR_FLT_(0, __VA_ARGS__, "")

#define cr_log_info(...)  mpcr_log("info", __VA_ARGS__)
#define cr_log_warn(...)  mpcr_log("warn", __VA_ARGS__)
#define cr_log_error(...) mpcr_log("error", __VA_ARGS__)

#endif
