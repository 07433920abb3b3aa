/* SPDX-License-Identifier: MIT */
/* Internal to the command: error messages into a caller's buffer. */
#ifndef MIMPROF_CLI_FAIL_H
#define MIMPROF_CLI_FAIL_H

#include <stddef.h>

/* Formats the message into err[errlen] (when err is not NULL) and
 * returns -1, so that `return mpt_fail(err, errlen, ...);` ends a
 * function that failed. */
int mpt_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
