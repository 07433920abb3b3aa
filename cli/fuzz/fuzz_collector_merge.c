/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the collector's merge of reports (collector_merge.c),
 * whose inputs come from the profiled processes. The input is split in
 * two at a point chosen by its first byte; each half, and the whole, are
 * merged (with and without their in-use values), and whatever is merged
 * must decode again. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "collector.h"
#include "profile.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cut = 1 + (size - 1) * data[0] / 255;
    mpt_merge_in in[3] = {{data + 1, cut - 1, true},
                          {data + cut, size - cut, data[0] & 1},
                          {data + 1, size - 1, false}};
    for (size_t n = 1; n <= 3; n++) {
        uint8_t *out;
        size_t len;
        if (mpt_pprof_merge(in + 3 - n, n, n == 2 ? 1000 : 0, 10, &out, &len) != 0)
            continue;
        Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, out);
        if (p == NULL)
            abort(); /* what the merge packs must decode */
        perftools__profiles__profile__free_unpacked(p, NULL);
        free(out);
    }
    return 0;
}
