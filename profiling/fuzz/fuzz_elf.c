/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the report side's ELF reader (symbol tables, build-id
 * notes) on arbitrary bytes. Every entry point must refuse malformed input
 * without reading outside it (ASan) or undefined behaviour (UBSan). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    (void)mp_elf_file_build_id(data, size, id);
    (void)mp_elf_notes_build_id(data, size, 4, id);
    (void)mp_elf_notes_build_id(data, size, 8, id);
    mp_elf_symtab t;
    if (mp_elf_read_symbols(data, size, &t) == MP_ELF_OK) {
        if (t.count == 0 || t.syms == NULL)
            abort();
        for (size_t i = 0; i < t.count; i++) {
            if (t.syms[i].name >= t.names_len)
                abort();
            /* Names are NUL-terminated inside the copy. */
            if (memchr(t.names + t.syms[i].name, '\0', t.names_len - t.syms[i].name) == NULL)
                abort();
            if (i > 0 && t.syms[i - 1].addr >= t.syms[i].addr)
                abort();
            const mp_elf_sym *s = mp_elf_symtab_lookup(&t, t.syms[i].addr);
            if (s != &t.syms[i])
                abort();
        }
        (void)mp_elf_symtab_lookup(&t, 0);
        (void)mp_elf_symtab_lookup(&t, UINT64_MAX);
        mp_elf_symtab_free(&t);
    }
    return 0;
}
