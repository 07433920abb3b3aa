/* SPDX-License-Identifier: MIT */
/* Entry points for sampling allocators written in another language
 * (<mimprof/sampling_foreign.h>): the address of the thread's countdown,
 * which such a language cannot name, and the filter's size, which it
 * mirrors. The sampling path itself is sampler.c's, unchanged. */
#include <mimprof/sampling_foreign.h>

/* The address of an initial-exec TLS variable: the thread pointer plus a
 * fixed offset, no call into the loader (so no allocation, no lock). */
uint64_t *mp_prof_foreign_countdown(void) { return &mp_prof_hook_countdown; }

size_t mp_prof_foreign_filter_size(void) { return sizeof(mp_prof_hook_filter_t); }
