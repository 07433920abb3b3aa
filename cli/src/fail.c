/* SPDX-License-Identifier: MIT */
/* Error messages into a caller's buffer (fail.h). */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

int mpt_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
