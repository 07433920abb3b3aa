/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a server's error reply, which comes from the network
 * and is printed to terminals and logs (reply.h), then classified as
 * /ingest's 422s are (retry.h). Oracles: the message is printable ASCII
 * only and fits its buffer, a JSON "message" is taken whole (up to the
 * buffer) and a plain body only to its first line; the 422 classification
 * is one of its three answers; a message is the "same" as itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "retry.h"

/* What http.c keeps of a reply: its first 8 KiB. */
#define REPLY_MAX 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *body, size_t cap)
{
    char out[300];
    memset(out, 'X', sizeof out);
    mp_pyro_server_message(body, out, cap);
    size_t n = strnlen(out, cap);
    if (n >= cap)
        abort(); /* no NUL within the buffer */
    for (size_t i = 0; i < n; i++)
        if (out[i] < 0x20 || out[i] >= 0x7F)
            abort(); /* a byte that could drive a terminal */
    if (cap < sizeof out && out[cap] != 'X')
        abort(); /* wrote past the buffer it was given */
    if (!strstr(body, "\"message\"") && (strchr(out, '\n') || n > 200))
        abort();
    mp_pyro_status st = mp_pyro_classify_422(out);
    if (st != MP_PYRO_E_HTTP_REJECTED && st != MP_PYRO_E_HTTP_RATE_LIMITED &&
        st != MP_PYRO_E_HTTP_SERVER)
        abort();
    if (!mp_pyro_same_message(out, out))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > REPLY_MAX)
        size = REPLY_MAX;
    char *body = malloc(size + 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    body[size] = '\0';
    check(body, 300); /* http.c's buffer */
    check(body, 1 + (size % 16));
    free(body);
    return 0;
}
