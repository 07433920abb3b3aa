/* SPDX-License-Identifier: MIT */
/* The sampling allocator instantiated over every provider this build has,
 * for the shared provider contract suite (tests/contracts/contract.c in
 * the workspace). Compile contract.c with
 *
 *   -DCONTRACT_INCLUDE="contract_sampling.h"
 *   -DCONTRACT_PROVIDER=mp_prof_sampled_mimalloc   (or _jemalloc)
 *   -DCONTRACT_SETUP=contract_sampling_setup
 *   -DCONTRACT_TEARDOWN=contract_sampling_teardown
 *
 * and link contract_sampling.c (which defines the set-up: a session with
 * a small interval, so that most of the suite's blocks are sampled and the
 * sampled paths of alloc, free, realloc and realloc failure are the ones
 * under contract), mimprof-profiling and the provider's dependency. */
#ifndef MIMPROF_TEST_CONTRACT_SAMPLING_H
#define MIMPROF_TEST_CONTRACT_SAMPLING_H

#include <mimprof/sampling.h>
#include <mimprof/sys.h>

#ifdef MP_SYS_HAVE_MIMALLOC
MP_PROF_SAMPLING_ALLOCATOR_INLINE(mp_prof_sampled_mimalloc, mp_sys_mimalloc);
#endif
#ifdef MP_SYS_HAVE_JEMALLOC
MP_PROF_SAMPLING_ALLOCATOR_INLINE(mp_prof_sampled_jemalloc, mp_sys_jemalloc);
#endif

/* Starts a session (interval CONTRACT_SAMPLING_INTERVAL, default 4 KiB). */
void contract_sampling_setup(void);
/* Reports (the report must succeed) and ends the session. */
void contract_sampling_teardown(void);

#endif
