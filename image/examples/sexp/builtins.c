/* SPDX-License-Identifier: MIT */
/* The C builtins closures hold, found the way an interpreter with a C
 * interface finds them: by name, through dlsym. They are exported (the
 * executable is linked with -rdynamic), which is also what lets the image
 * writer name them as dlsym("", "mimprof_sexp_fn_add") and a loader in
 * another process reacquire them. */
#define _GNU_SOURCE
#include "sexp.h"

#include <dlfcn.h>
#include <string.h>

#define PREFIX "mimprof_sexp_fn_"

intptr_t mimprof_sexp_fn_add(intptr_t a, intptr_t b);
intptr_t mimprof_sexp_fn_sub(intptr_t a, intptr_t b);
intptr_t mimprof_sexp_fn_mul(intptr_t a, intptr_t b);
intptr_t mimprof_sexp_fn_min(intptr_t a, intptr_t b);
intptr_t mimprof_sexp_fn_max(intptr_t a, intptr_t b);

intptr_t mimprof_sexp_fn_add(intptr_t a, intptr_t b) { return a + b; }
intptr_t mimprof_sexp_fn_sub(intptr_t a, intptr_t b) { return a - b; }
intptr_t mimprof_sexp_fn_mul(intptr_t a, intptr_t b) { return a * b; }
intptr_t mimprof_sexp_fn_min(intptr_t a, intptr_t b) { return a < b ? a : b; }
intptr_t mimprof_sexp_fn_max(intptr_t a, intptr_t b) { return a > b ? a : b; }

sexp_builtin_fn sexp_builtin(const char *name, size_t len)
{
    char sym[64] = PREFIX;
    if (len == 0 || len >= sizeof sym - sizeof PREFIX)
        return NULL;
    memcpy(sym + sizeof PREFIX - 1, name, len);
    sym[sizeof PREFIX - 1 + len] = '\0';
    void *p = dlsym(RTLD_DEFAULT, sym);
    sexp_builtin_fn fn;
    memcpy(&fn, &p, sizeof fn); /* object pointer to function pointer, as POSIX allows */
    return fn;
}

const char *sexp_builtin_name(sexp_builtin_fn fn)
{
    Dl_info info;
    void *p;
    memcpy(&p, &fn, sizeof p);
    if (!dladdr(p, &info) || !info.dli_sname || info.dli_saddr != p ||
        strncmp(info.dli_sname, PREFIX, sizeof PREFIX - 1) != 0)
        return NULL;
    return info.dli_sname + sizeof PREFIX - 1;
}
