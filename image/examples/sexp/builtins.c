/* The C builtins closures hold. They are exported (the executable is linked
 * with -rdynamic), which is what lets the image writer name them as
 * dlsym("", "mimprof_sexp_fn_add") and a loader reacquire them. */
#include "sexp.h"

#include <string.h>

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

static const struct {
    const char *name;
    sexp_builtin_fn fn;
} builtins[] = {
    {"add", mimprof_sexp_fn_add}, {"sub", mimprof_sexp_fn_sub}, {"mul", mimprof_sexp_fn_mul},
    {"min", mimprof_sexp_fn_min}, {"max", mimprof_sexp_fn_max},
};

sexp_builtin_fn sexp_builtin(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strlen(builtins[i].name) == len && memcmp(builtins[i].name, name, len) == 0)
            return builtins[i].fn;
    return NULL;
}

const char *sexp_builtin_name(sexp_builtin_fn fn)
{
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (builtins[i].fn == fn)
            return builtins[i].name;
    return NULL;
}
