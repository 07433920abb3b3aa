/* SPDX-License-Identifier: MIT */
/* The dynamic section of an ELF object, as far as `mimprof run` needs it
 * to tell which allocator a program links (run_pick.c): its DT_NEEDED
 * names and its library search path (DT_RUNPATH, else DT_RPATH). Reads
 * through a callback, so that the parser runs on files (pread) and on
 * fuzzer input alike; never trusts a count, offset or size it reads. */
#ifndef MIMPROF_CLI_ELF_NEEDED_H
#define MIMPROF_CLI_ELF_NEEDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MPT_ELF_MAX_NEEDED 64

typedef struct mpt_elf_dyn {
    unsigned nneeded;
    char needed[MPT_ELF_MAX_NEEDED][128]; /* names longer than 127 bytes are skipped */
    char runpath[1024];                   /* "" when none (or too long) */
} mpt_elf_dyn;

/* Reads `n` bytes at `off` into buf; the bytes read (fewer at the end). */
typedef ssize_t (*mpt_elf_read_fn)(void *ctx, void *buf, size_t n, uint64_t off);

/* Fills *out from a 64-bit little-endian ELF object; false when the input
 * is not one or has no readable dynamic section (*out is then empty). */
bool mpt_elf_needed(mpt_elf_read_fn rd, void *ctx, mpt_elf_dyn *out);

#endif
