/* SPDX-License-Identifier: MIT */
/* /debug/pprof/symbol, as Go's net/http/pprof serves it (http.h):
 * `go tool pprof` asks it for the names of the addresses of every mapping
 * a profile does not fully name (a library without symbols for some of
 * its functions), and fails the whole fetch when the endpoint does not
 * answer. GET answers "num_symbols: 1"; POST with a body of addresses
 * "0xADDR+0xADDR..." answers that line and "0xADDR NAME" for each address
 * the dynamic loader can name (dladdr(): exported symbols only), names
 * demangled as reports name functions (mp_prof_demangle). Unknown
 * addresses are left out, as Go's handler does. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "arena.h"
#include "http.h"

enum { NAME_MAX_BYTES = 512 };

/* The answer lives in a mapping after a header that holds its size. */
enum { HDR = 16 };

static void release(void *body, size_t len)
{
    (void)len;
    char *m = (char *)body - HDR;
    mpc_unmap(m, *(size_t *)m);
}

/* Appends "0xADDR NAME\n" for `addr` when it has a name. */
static size_t name_line(char *out, size_t cap, uintptr_t addr)
{
    Dl_info info;
    if (addr == 0 || dladdr((void *)addr, &info) == 0 || info.dli_sname == NULL)
        return 0;
    char human[NAME_MAX_BYTES];
    size_t hlen = 0;
    const char *name = info.dli_sname;
    if (mp_prof_demangle(name, human, sizeof human, &hlen) == MP_PROF_OK && hlen < sizeof human)
        name = human;
    int n = snprintf(out, cap, "%#lx %.*s\n", (unsigned long)addr, NAME_MAX_BYTES, name);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void mpc_http_symbol(mpc_conn *c, bool head_only, const char *body, size_t len)
{
    size_t naddr = 1;
    for (size_t i = 0; i < len; i++)
        naddr += body[i] == '+';
    size_t cap = 64 + naddr * (24 + NAME_MAX_BYTES);
    char *m = mpc_map(HDR + cap);
    if (m == NULL) {
        mpc_http_text(c, 503, "Service Unavailable", "mimprof: out of memory");
        return;
    }
    *(size_t *)m = HDR + cap;
    char *out = m + HDR;
    size_t n = (size_t)snprintf(out, cap, "num_symbols: 1\n");
    char word[32];
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && body[j] != '+')
            j++;
        if (j - i > 2 && j - i < sizeof word) {
            memcpy(word, body + i, j - i);
            word[j - i] = '\0';
            char *end;
            unsigned long long a = strtoull(word, &end, 0);
            if (*end == '\0' || *end == '\n' || *end == '\r')
                n += name_line(out + n, cap - n, (uintptr_t)a);
        }
        i = j + 1;
    }
    mpc_http_ok(c, "text/plain; charset=utf-8", n);
    if (head_only)
        release(out, n);
    else
        mpc_conn_body(c, out, n, release);
}
