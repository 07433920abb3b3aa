/* SPDX-License-Identifier: MIT */
/* Status codes, their descriptions, and the detail sentence. */
#include "internal.h"

#include <stdio.h>

const char *mp_img_strerror(mp_img_status status)
{
    switch (status) {
    case MP_IMG_OK:
        return "success";
    case MP_IMG_E_ARGUMENT:
        return "invalid argument";
    case MP_IMG_E_NOMEM:
        return "out of memory";
    case MP_IMG_E_IO:
        return "input/output error";
    case MP_IMG_E_NO_SHAPE:
        return "type has no shape";
    case MP_IMG_E_SHAPE:
        return "object contradicts its shape";
    case MP_IMG_E_NOT_ON_HEAP:
        return "reference to something not on the heap";
    case MP_IMG_E_UNNAMEABLE:
        return "foreign value cannot be named";
    case MP_IMG_E_LIMIT:
        return "beyond the limits of the format";
    case MP_IMG_E_NOT_IMAGE:
        return "not an image";
    case MP_IMG_E_MISMATCH:
        return "image header does not match this process";
    case MP_IMG_E_INCOMPLETE:
        return "image is incomplete";
    case MP_IMG_E_CHECKSUM:
        return "image checksum mismatch";
    case MP_IMG_E_CORRUPT:
        return "image is corrupt";
    case MP_IMG_E_FOREIGN:
        return "foreign value cannot be reacquired";
    }
    return "unknown status";
}

const char *mp_img_version(void) { return MP_IMG_PACKAGE_VERSION; }

mp_img_status img_fail(mp_img_error *err, mp_img_status status, const char *fmt, ...)
{
    if (err) {
        err->status = status;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof err->detail, fmt, ap);
        va_end(ap);
    }
    return status;
}

mp_img_status img_ok(mp_img_error *err)
{
    if (err) {
        err->status = MP_IMG_OK;
        err->detail[0] = '\0';
    }
    return MP_IMG_OK;
}
