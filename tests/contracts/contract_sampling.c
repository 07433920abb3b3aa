/* SPDX-License-Identifier: MIT */
/* Set-up of the contract suite over the sampling allocator (see
 * contract_sampling.h). Built with -DCONTRACT_SOURCE="<path of
 * tests/contracts/contract.c>", which it includes: the suite itself is the
 * workspace's, unchanged. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include <mimprof/profiling.h>

#include "contract_sampling.h"

#ifndef CONTRACT_SAMPLING_INTERVAL
#define CONTRACT_SAMPLING_INTERVAL 4096
#endif

#define CS_CAT2(a, b) a##_##b
#define CS_CAT(a, b)  CS_CAT2(a, b)
#define CS_P(op)      CS_CAT(CONTRACT_PROVIDER, op)

static mp_profiler *cs_profiler;

void contract_sampling_setup(void)
{
    CS_P(dealloc)(CS_P(alloc)(64, 8), 64, 8); /* the allocator is observed */
    mp_prof_config c;
    mp_prof_config_init(&c);
    c.sample_interval_bytes = CONTRACT_SAMPLING_INTERVAL;
    c.symbolize = MP_PROF_SYMBOLIZE_NONE;
    c.seed = 99;
    mp_prof_status st = mp_profiler_start(&c, &cs_profiler);
    if (st != MP_PROF_OK) {
        fprintf(stderr, "contract set-up: %s\n", mp_prof_strerror(st));
        abort();
    }
}

void contract_sampling_teardown(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report(cs_profiler, &buf, &len);
    if (st != MP_PROF_OK || len == 0) {
        fprintf(stderr, "contract tear-down: report: %s\n", mp_prof_strerror(st));
        abort();
    }
    mp_prof_buffer_free(buf);
    mp_profiler_free(cs_profiler);
    cs_profiler = NULL;
}

#include CONTRACT_SOURCE
