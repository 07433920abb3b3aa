/* SPDX-License-Identifier: MIT */
/* libFuzzer target: mp_demangle / mp_prof_demangle (src/report/demangle.c)
 * on arbitrary names: a refusal or a human name, never a crash, a read
 * past the name or a write past the buffer; the length is the same for
 * every buffer size and a short buffer holds a prefix of the whole name
 * (snprintf-style). The corpus holds real linkage names (libstdc++'s,
 * the C++ test sites', Rust legacy and v0). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include <mimprof/profiling.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MP_DEMANGLE_MAX_INPUT + 64)
        return 0;
    char *name = malloc(size + 1); /* exactly sized: ASan sees an overread */
    if (name == NULL)
        return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    static char full[1 << 16];
    char *small = malloc(17);
    if (small == NULL) {
        free(name);
        return 0;
    }
    long n = mp_demangle(name, full, sizeof full);
    long m = mp_demangle(name, small, 17);
    if (n != m)
        abort();
    if (n >= 0) {
        if ((size_t)n < sizeof full && strlen(full) != (size_t)n)
            abort();
        size_t want = (size_t)n < 16 ? (size_t)n : 16;
        if (strlen(small) != want || memcmp(small, full, want) != 0)
            abort();
    }
    size_t len = 0;
    mp_prof_status st = mp_prof_demangle(name, NULL, 0, &len);
    if (n >= 0 ? (st != MP_PROF_OK || len != (size_t)n) : st == MP_PROF_OK)
        abort();
    free(small);
    free(name);
    return 0;
}
