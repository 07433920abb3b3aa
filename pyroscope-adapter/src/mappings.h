/* SPDX-License-Identifier: MIT */
/* The process's executable segments (dl_iterate_phdr) with GNU build-ids,
 * for pprof mappings. Takes the loader lock: never call from an
 * allocation hook. Not installed. */
#ifndef MP_PYRO_MAPPINGS_H
#define MP_PYRO_MAPPINGS_H

#include <stddef.h>
#include <stdint.h>

typedef struct mp_pyro_mapping {
    uint64_t start, limit, offset; /* page-aligned start, end, file offset */
    char *file;                    /* path (the executable's resolved via /proc/self/exe) */
    char build_id[129];            /* lower-case hex, "" when absent */
    unsigned object;               /* index of the loaded object (0 = the executable) */
} mp_pyro_mapping;

/* Sorted by start. Returns 0 or -1 (out of memory). */
int mp_pyro_mappings_read(mp_pyro_mapping **out, size_t *n);
void mp_pyro_mappings_free(mp_pyro_mapping *m, size_t n);
/* The mapping holding `addr`, or NULL. */
const mp_pyro_mapping *mp_pyro_mapping_find(const mp_pyro_mapping *m, size_t n, uint64_t addr);

#endif
