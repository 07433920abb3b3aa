/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the ELF dynamic-section reader of `mimprof run`'s
 * allocator choice (src/elf_needed.c) on arbitrary bytes. It must never
 * read outside what it was given, and what it returns must be
 * NUL-terminated names. */
#include <stdint.h>
#include <string.h>

#include "elf_needed.h"

struct input {
    const uint8_t *data;
    size_t len;
};

static ssize_t input_read(void *ctx, void *buf, size_t n, uint64_t off)
{
    const struct input *in = ctx;
    if (off >= in->len)
        return 0;
    size_t k = in->len - off < n ? in->len - off : n;
    memcpy(buf, in->data + off, k);
    return (ssize_t)k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size};
    static mpt_elf_dyn dyn;
    if (mpt_elf_needed(input_read, &in, &dyn)) {
        for (unsigned i = 0; i < dyn.nneeded; i++)
            if (strnlen(dyn.needed[i], sizeof dyn.needed[i]) == sizeof dyn.needed[i])
                __builtin_trap();
        if (strnlen(dyn.runpath, sizeof dyn.runpath) == sizeof dyn.runpath)
            __builtin_trap();
    }
    return 0;
}
