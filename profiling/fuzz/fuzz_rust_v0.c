/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the Rust v0 demangler (src/report/rust_v0.c) on
 * arbitrary names, "_R" prepended so that every input reaches the
 * grammar: a refusal or a human name, never a crash, a read past the name
 * or a write past the buffer, never more work than the budget (the bound
 * that stops what stalled libiberty: corpus/rust_v0 holds both of its
 * stalls, and exponential back-reference chains built like them); the
 * same answer for every buffer size, a short buffer holding a prefix. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "rust_v0.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MP_DEMANGLE_MAX_INPUT + 64)
        return 0;
    /* exactly sized: ASan sees an overread */
    size_t skip = size >= 2 && data[0] == '_' && data[1] == 'R' ? 2 : 0;
    char *name = malloc(size - skip + 3);
    if (name == NULL)
        return 0;
    memcpy(name, "_R", 2);
    memcpy(name + 2, data + skip, size - skip);
    name[size - skip + 2] = '\0';
    static char full[MP_DEMANGLE_MAX_OUTPUT + 1];
    char *small = malloc(9);
    if (small == NULL) {
        free(name);
        return 0;
    }
    unsigned long w1 = 0, w2 = 0;
    long n = mp_rust_v0_demangle(name, full, sizeof full, &w1);
    long m = mp_rust_v0_demangle(name, small, 9, &w2);
    if (n != m || w1 > MP_V0_MAX_WORK + MP_DEMANGLE_MAX_INPUT || n > MP_DEMANGLE_MAX_OUTPUT)
        abort();
    if (n >= 0) {
        if (strlen(full) != (size_t)n)
            abort();
        size_t want = (size_t)n < 8 ? (size_t)n : 8;
        if (strlen(small) != want || memcmp(small, full, want) != 0)
            abort();
        /* through the public entry, when the name is within its length bound */
        if (strlen(name) <= MP_DEMANGLE_MAX_INPUT && mp_demangle(name, NULL, 0) != n)
            abort();
    }
    free(small);
    free(name);
    return 0;
}
