/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the pprof reader of the mimprof command (untrusted
 * files: gzip + protobuf + reference checks) and the three views over
 * whatever it accepts. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pprof_reader.h"
#include "views.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (sink == NULL)
        sink = fopen("/dev/null", "w");
    mpt_limits lim;
    mpt_limits_init(&lim);
    lim.max_inflated = (size_t)16 << 20;
    lim.max_frames = (size_t)1 << 20;
    lim.max_decoded = (size_t)64 << 20;
    /* The age filters too (--older-than 10s / --younger-than 10m), chosen
     * by the input's last byte. */
    if (size > 0 && data[size - 1] % 3 == 1)
        lim.older_than_ns = (int64_t)10 * 1000000000;
    else if (size > 0 && data[size - 1] % 3 == 2)
        lim.younger_than_ns = (int64_t)600 * 1000000000;
    mpt_profile *p = NULL;
    char err[512];
    if (mpt_profile_parse(data, size, &lim, &p, err, sizeof err) != 0)
        return 0;
    for (size_t t = 0; t < p->ntypes; t++) {
        mpt_flame_opts fo;
        mpt_flame_opts_init(&fo);
        mpt_top_print(sink, p, t, 0, (t & 1) != 0, (t & 2) != 0);
        mpt_flame_write(sink, p, t, &fo);
    }
    mpt_diff_print(sink, p, p, NULL, 5, false, err, sizeof err);
    mpt_profile_free(p);
    return 0;
}
