/* SPDX-License-Identifier: MIT */
/* Internal helpers shared by the package: clocks, strings, logging, a
 * small RNG and base64. Not installed. */
#ifndef MP_PYRO_UTIL_H
#define MP_PYRO_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <mimprof/pyroscope.h>

#define MP_PYRO_ERRLEN 512

/* Wall clock and monotonic clock, nanoseconds. */
int64_t mp_pyro_now_real_ns(void);
int64_t mp_pyro_now_mono_ns(void);

/* strdup that returns NULL for NULL. */
char *mp_pyro_strdup(const char *s);
/* Frees a secret after overwriting it. NULL is a no-op. */
void mp_pyro_free_secret(char *s);
/* snprintf into a fixed buffer, always NUL-terminated. */
void mp_pyro_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A growable byte buffer. `oom` latches an allocation failure. */
typedef struct mp_pyro_buf {
    uint8_t *data;
    size_t len, cap;
    int oom;
} mp_pyro_buf;
void mp_pyro_buf_put(mp_pyro_buf *b, const void *p, size_t n);
void mp_pyro_buf_puts(mp_pyro_buf *b, const char *s);
void mp_pyro_buf_printf(mp_pyro_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminates (not counted in len) and returns the data, or NULL on OOM. */
char *mp_pyro_buf_cstr(mp_pyro_buf *b);
void mp_pyro_buf_free(mp_pyro_buf *b);

/* Reads the whole regular file at `path` (not through a final symbolic
 * link; anything else is refused without blocking) into a malloc()ed
 * buffer (*out, to be freed; NULL for an empty file) of *len bytes. -1 when it cannot be
 * opened, read or held (*out and *len untouched; errno as the failing
 * call left it). */
int mp_pyro_read_file(const char *path, uint8_t **out, size_t *len);

/* Percent-encodes `s` for a query value (unreserved characters kept). */
void mp_pyro_buf_put_query_escaped(mp_pyro_buf *b, const char *s);
/* Standard base64 with padding. */
void mp_pyro_buf_put_base64(mp_pyro_buf *b, const uint8_t *p, size_t n);

/* xorshift64* seeded from getrandom(); not for secrets. */
typedef struct mp_pyro_rng {
    uint64_t s;
} mp_pyro_rng;
void mp_pyro_rng_seed(mp_pyro_rng *r);
uint64_t mp_pyro_rng_next(mp_pyro_rng *r);
/* A random (version 4) UUID string, 36 characters + NUL. */
void mp_pyro_uuid4(mp_pyro_rng *r, char out[37]);

/* Logging through the config's sink (or stderr). */
void mp_pyro_log(const mp_pyro_config *cfg, mp_pyro_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
