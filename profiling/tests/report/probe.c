/* SPDX-License-Identifier: MIT */
/* Reports its own known sites into the file argv[1] (symbolization
 * argv[2]: `lines`, the default, or `functions`), then prints "alpha=<hex pc> gamma=<hex pc>
 * hook=<hex pc>". Run as built and as a `strip --strip-all` copy by test_stripped.c. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_builder.h"
#include "sites.h"

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    bool functions = argc == 3 && strcmp(argv[2], "functions") == 0;
    uintptr_t pcs[3];
    sites_three_pcs(pcs);
    mp_report_cache *c = mp_report_cache_new();
    mp_report_options o = {.period = 4096,
                           .symbolize =
                               functions ? MP_PROF_SYMBOLIZE_FUNCTIONS : MP_PROF_SYMBOLIZE_LINES};
    mp_report_builder *b = mp_report_begin(c, &o);
    double v[4] = {1, 64, 1, 64};
    for (int i = 0; i < 3; i++)
        if (mp_report_add(b, &pcs[i], 1, false, v, true) != MP_PROF_OK)
            return 1;
    uint8_t *buf;
    size_t len;
    if (mp_report_finish(b, &buf, &len) != MP_PROF_OK)
        return 1;
    FILE *f = fopen(argv[1], "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        return 1;
    printf("alpha=%lx gamma=%lx hook=%lx quality=%d\n", (unsigned long)pcs[0],
           (unsigned long)pcs[1], (unsigned long)pcs[2], mp_report_cache_last_quality(c));
    free(buf);
    mp_report_cache_free(c);
    return 0;
}
