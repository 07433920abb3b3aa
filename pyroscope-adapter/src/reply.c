/* SPDX-License-Identifier: MIT */
/* A server's error reply reduced to one printable line (reply.h). */
#include "reply.h"

#include <stdbool.h>
#include <string.h>

#define FIRST_LINE_MAX 200

static bool printable(char c) { return c >= 0x20 && c < 0x7F; }

/* The opening quote of the "message" value, or NULL when the body has
 * no such key. */
static const char *json_message(const char *body)
{
    const char *m = strstr(body, "\"message\"");
    if (!m)
        return NULL;
    m = strchr(m + 9, ':');
    return m ? strchr(m, '"') : NULL;
}

void mp_pyro_server_message(const char *body, char *out, size_t len)
{
    if (len == 0)
        return;
    size_t o = 0;
    const char *m = json_message(body);
    if (m) {
        for (m++; *m && *m != '"' && o + 1 < len; m++) {
            if (*m == '\\' && (m[1] == '"' || m[1] == '\\'))
                m++;
            out[o++] = printable(*m) ? *m : '?';
        }
    } else {
        for (const char *p = body;
             *p && *p != '\n' && *p != '\r' && o + 1 < len && o < FIRST_LINE_MAX; p++)
            out[o++] = printable(*p) ? *p : '?';
    }
    out[o] = '\0';
}
