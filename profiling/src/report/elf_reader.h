/* SPDX-License-Identifier: MIT */
/* Internal: a small, bounds-checked ELF reader for the report side.
 *
 * Everything here parses untrusted bytes (a file on disk may be truncated,
 * replaced or hostile): every offset and size is checked against the
 * buffer before it is used, and no input makes a function read outside
 * [data, data + size). Fuzzed by profiling/fuzz/fuzz_elf.c.
 *
 * Only the native class and byte order are read (ELFCLASS64 little-endian
 * on x86_64/aarch64); other files are rejected with MP_ELF_E_FORMAT.
 */
#ifndef MIMPROF_PROFILING_REPORT_ELF_READER_H
#define MIMPROF_PROFILING_REPORT_ELF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mp_elf_status {
    MP_ELF_OK = 0,
    MP_ELF_E_FORMAT = 1, /* not a (native) ELF file, or malformed */
    MP_ELF_E_NOSYMS = 2, /* no .symtab and no .dynsym with functions */
    MP_ELF_E_NOMEM = 3,
    MP_ELF_E_IO = 4,      /* the file could not be opened or mapped */
    MP_ELF_E_MISMATCH = 5 /* the file's build-id is not the expected one */
} mp_elf_status;

/* Longest build-id kept (GNU ld writes 20 bytes for sha1, 16 for md5). */
#define MP_ELF_BUILD_ID_MAX 64

/* One function symbol: [addr, addr + size) in the object's own virtual
 * addresses (st_value); size 0 = unknown (extends to the next symbol). */
typedef struct mp_elf_sym {
    uint64_t addr;
    uint64_t size;
    uint32_t name; /* offset into mp_elf_symtab.names */
} mp_elf_sym;

typedef enum mp_elf_sym_source {
    MP_ELF_SYMS_NONE = 0,
    MP_ELF_SYMS_SYMTAB = 1,
    MP_ELF_SYMS_DYNSYM = 2
} mp_elf_sym_source;

/* Masks of sections to read symbols from (mp_elf_read_symbols_file). */
#define MP_ELF_FROM_SYMTAB (1u << MP_ELF_SYMS_SYMTAB)
#define MP_ELF_FROM_DYNSYM (1u << MP_ELF_SYMS_DYNSYM)

/* Function symbols of one object, sorted by address, one per address. */
typedef struct mp_elf_symtab {
    mp_elf_sym *syms;
    size_t count;
    char *names; /* NUL-terminated names, back to back */
    size_t names_len;
    mp_elf_sym_source source;
} mp_elf_symtab;

/* Scans a buffer of ELF notes (the contents of a PT_NOTE segment or a
 * SHT_NOTE section whose alignment is `align`: 8 means 8-byte padding,
 * anything else 4) for NT_GNU_BUILD_ID. Copies at most MP_ELF_BUILD_ID_MAX
 * bytes to `out`; returns the id length, 0 if none. */
size_t mp_elf_notes_build_id(const void *notes, size_t len, uint64_t align,
                             uint8_t out[MP_ELF_BUILD_ID_MAX]);

/* Build-id of a whole ELF file image (from its PT_NOTE segments, else its
 * SHT_NOTE sections). Returns the length, 0 if none or malformed. */
size_t mp_elf_file_build_id(const uint8_t *data, size_t size, uint8_t out[MP_ELF_BUILD_ID_MAX]);

/* Reads the function symbols (STT_FUNC, STT_GNU_IFUNC, defined, nonzero)
 * of an ELF image: .symtab when present and non-empty, else .dynsym.
 * On success `out` owns malloc()ed arrays: release with mp_elf_symtab_free. */
mp_elf_status mp_elf_read_symbols(const uint8_t *data, size_t size, mp_elf_symtab *out);

/* mmap()s `path` read-only and reads its function symbols as
 * mp_elf_read_symbols does, from the first of .symtab and .dynsym that
 * `sources` (MP_ELF_FROM_* bits) names and the file holds. When
 * `expect_build_id` (lower-case hex) is non-empty and the file carries a
 * different build-id (it was replaced on disk since it was loaded), reads
 * nothing and returns MP_ELF_E_MISMATCH. */
mp_elf_status mp_elf_read_symbols_file(const char *path, const char *expect_build_id,
                                       unsigned sources, mp_elf_symtab *out);

void mp_elf_symtab_free(mp_elf_symtab *t);

/* The page-aligned virtual address at which the PT_LOAD segment whose
 * page-aligned file offset is `file_offset` starts, from the ELF header
 * and program headers in `data` (at least the file's first `size` bytes).
 * A mapping of that segment at `start` has the load bias
 * start - *vaddr: that is start - file_offset only where the linker put
 * the segment's address equal to its offset, which lld (Rust's default
 * linker) does not. False when `data` holds no such segment. */
bool mp_elf_segment_vaddr(const uint8_t *data, size_t size, uint64_t file_offset, uint64_t page,
                          uint64_t *vaddr);

/* mp_elf_segment_vaddr over the headers of the file at `path`. */
bool mp_elf_file_segment_vaddr(const char *path, uint64_t file_offset, uint64_t *vaddr);

/* The symbol containing object-relative address `addr`, or NULL. A symbol
 * of size 0 covers up to the next symbol's address. */
const mp_elf_sym *mp_elf_symtab_lookup(const mp_elf_symtab *t, uint64_t addr);

/* Heap bytes held by `t`. */
size_t mp_elf_symtab_bytes(const mp_elf_symtab *t);

/* Lower-case hex of `id` into `out` (2 * len + 1 bytes). */
void mp_elf_hex(const uint8_t *id, size_t len, char *out);

#endif
