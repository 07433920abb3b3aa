/* SPDX-License-Identifier: MIT */
/* The page of `mimprof report` (report.h): the template (cli/src/report/,
 * stylesheet and script inlined at build time by report/embed.py) with
 * the data in its <script type="application/json"> at @@DATA@@. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "report.h"

extern const unsigned char mpt_report_page[];
extern const size_t mpt_report_page_len;

int mpt_report_html_write(FILE *out, const char *json, size_t len)
{
    static const char marker[] = "@@DATA@@";
    const char *page = (const char *)mpt_report_page;
    const char *at = memmem(page, mpt_report_page_len, marker, sizeof marker - 1);
    if (at == NULL)
        return -1;
    size_t head = (size_t)(at - page);
    fwrite(page, 1, head, out);
    fwrite(json, 1, len, out);
    fwrite(at + sizeof marker - 1, 1, mpt_report_page_len - head - (sizeof marker - 1), out);
    return ferror(out) ? -1 : 0;
}
