/* SPDX-License-Identifier: MIT */
/* Internal to the command: inflating gzip input with a bound. */
#ifndef MIMPROF_CLI_GUNZIP_H
#define MIMPROF_CLI_GUNZIP_H

#include <stddef.h>
#include <stdint.h>

/* Inflates every gzip member of data[0..len) into a malloc()ed buffer of
 * at most `max` bytes (*out, *outlen). 0, or -1 with the reason in err. */
int mpt_gunzip(const uint8_t *data, size_t len, size_t max, uint8_t **out, size_t *outlen,
               char *err, size_t errlen);

#endif
