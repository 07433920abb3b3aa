/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the data builder of `mimprof report` (report_data.c)
 * over whatever the pprof reader accepts: the comments it parses (the
 * memory figures, a window's peak, a threshold report), the interning of
 * names, stacks and sites, the reduction and the JSON. The input is used
 * twice, as two moments, with options chosen by its last byte, so that
 * sites, kept stacks and top rows are merged, cut and renumbered. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pprof_reader.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mpt_limits lim;
    mpt_limits_init(&lim);
    lim.max_inflated = (size_t)16 << 20;
    lim.max_frames = (size_t)1 << 20;
    lim.max_decoded = (size_t)64 << 20;
    mpt_profile *p = NULL;
    char err[512];
    if (mpt_profile_parse(data, size, &lim, &p, err, sizeof err) != 0)
        return 0;
    unsigned k = size > 0 ? data[size - 1] : 0;
    mpt_report_opts o;
    mpt_report_opts_init(&o);
    o.sites = 1 + k % 4;
    o.site_frames = 1 + (k >> 2) % 3;
    o.stacks = 1 + (k >> 4) % 8;
    o.top_rows = 1 + (k >> 6);
    mpt_report_data *d = mpt_report_data_new(&o);
    if (d != NULL) {
        mpt_report_data_add(d, p, "heap.1.0.pb.gz", 1000, err, sizeof err);
        mpt_report_data_add(d, p, "heap.1.0.peak.pb.gz", 2000, err, sizeof err);
        mpt_report_data_skip(d, "bad\x01<\"name\".pb", err);
        mpt_report_proc proc = {.pid = 1, .program = "prog", .nfiles = 2, .max_bytes = 1};
        char *json = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&json, &len);
        if (mem != NULL) {
            mpt_report_data_write(d, mem, &proc, 1, 0);
            fclose(mem);
        }
        /* The document never holds a '<' (it sits inside <script>). */
        for (size_t i = 0; json != NULL && i < len; i++)
            if (json[i] == '<')
                abort();
        free(json);
        mpt_report_data_free(d);
    }
    mpt_profile_free(p);
    return 0;
}
