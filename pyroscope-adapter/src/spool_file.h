/* SPDX-License-Identifier: MIT */
/* The format of one spool file (spool_file.c): written by the spool,
 * read back by it and by fuzz_spool_file. Not installed. */
#ifndef MP_PYRO_SPOOL_FILE_H
#define MP_PYRO_SPOOL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "config_internal.h"
#include "owner.h"
#include "queue.h"
#include "util.h"

/* Appends the header of a file for `owner` (server, tenant, salted
 * credentials digest) holding a profile of series `series` and spy `spy`
 * (no control characters) over [from_ns, until_ns), whose gz_len bytes of
 * gzipped pprof follow the header. Out-of-memory: h->oom. */
void mp_pyro_spool_header(const mp_pyro_config *owner, const uint8_t salt[MP_PYRO_SALT_LEN],
                          const mp_pyro_series *series, const char *spy, int64_t from_ns,
                          int64_t until_ns, size_t gz_len, mp_pyro_buf *h);

/* Reads one file's bytes. 0: `e` holds its profile (series, spy, window,
 * gzipped bytes; e->path is left alone); 1: the file is another owner's
 * (or of version 1) and is kept unsent; -1: unreadable. Whatever it
 * returns, `e` is freed with mp_pyro_spool_entry_free. */
int mp_pyro_spool_parse(const mp_pyro_config *owner, const uint8_t *buf, size_t len,
                        mp_pyro_spool_entry *e);

#endif
