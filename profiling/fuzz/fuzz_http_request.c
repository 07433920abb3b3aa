/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the /debug/pprof endpoint's HTTP request reader
 * (control/http_parse.h), which reads what any local process may send to
 * the port. Oracles: never a read past the bytes received (an exact-size
 * copy: ASan), "incomplete" only while fewer than `cap` bytes arrived, a
 * refusal is one of the documented statuses with a reason, a request has
 * a target starting with '/' and a body inside the input, and the query's
 * seconds are in range or one of the two refusals. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *in, size_t len, size_t cap)
{
    mpc_http_req r;
    if (!mpc_http_parse(in, len, cap, &r)) {
        if (len >= cap)
            abort(); /* a full buffer is always answered */
        return;
    }
    switch (r.status) {
    case 0:
        break;
    case 400:
    case 405:
    case 413:
    case 414:
    case 431:
        if (r.why == NULL || r.why[0] == '\0')
            abort();
        return;
    default:
        abort();
    }
    if (r.target[0] != '/' || r.body_off > len || r.body_len > len - r.body_off)
        abort();
    if (r.method == MPC_HTTP_OTHER || (r.method == MPC_HTTP_POST && !r.symbol))
        abort();
    long s = mpc_http_query_seconds(r.query);
    if (s < -2 || s > MPC_HTTP_MAX_SECONDS)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size ? size : 1);
    if (in == NULL)
        return 0;
    memcpy(in, data, size);
    check(in, size, 16384); /* the connection's buffer */
    check(in, size, 1 + size / 2);
    free(in);
    return 0;
}
