/* SPDX-License-Identifier: MIT */
/* Renaming a pprof's sample types, so that a profile of another kind
 * (the window's peak) is its own profile type on the server
 * (`memory:peak_inuse_space:bytes:space:bytes` next to
 * `memory:inuse_space:bytes:space:bytes`). Not installed. */
#ifndef MP_PYRO_RETYPE_H
#define MP_PYRO_RETYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/pyroscope.h>

/* Whether `prefix` may start a sample type: 1..32 of [a-z0-9_] (the
 * server refuses a type with '-'; Pyroscope names are lower case). */
bool mp_pyro_retype_prefix_ok(const char *prefix);

/* `in` with every sample type T renamed `prefix`T (the new names are
 * appended to the string table; nothing else changes), into a malloc()ed
 * *out. MP_PYRO_E_INVALID_ARGUMENT when `in` is not a pprof Profile or a
 * sample type names no string; MP_PYRO_E_NOMEM. */
mp_pyro_status mp_pyro_retype(const uint8_t *in, size_t len, const char *prefix, uint8_t **out,
                              size_t *out_len);

#endif
