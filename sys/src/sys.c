/* SPDX-License-Identifier: MIT */
/* libmimprof-sys carries the package's identity. The providers themselves
 * are static inline functions in the public headers, so that wrappers
 * instantiated over them call the allocator directly. */
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */
#include <dlfcn.h>
#include <string.h>

#include <mimprof/sys.h>

const char *mp_sys_version(void) { return MP_SYS_PACKAGE_VERSION; }

int mp_sys_resolve_in_object_(const void *anchor, const char *name, void *out, size_t size)
{
    Dl_info obj, found;
    if (size != sizeof(void *) || dladdr(anchor, &obj) == 0 || obj.dli_fname == NULL)
        return 0;
    /* Already loaded (it contains `anchor`): NOLOAD only takes a reference,
     * which dlclose gives back; dlsym on the handle searches the object
     * before its dependencies, and the check below refuses a definition
     * found in a dependency (libc's malloc when the object has none). */
    void *h = dlopen(obj.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL)
        return 0;
    void *sym = dlsym(h, name);
    int ok = sym != NULL && dladdr(sym, &found) != 0 && found.dli_fbase == obj.dli_fbase;
    dlclose(h);
    if (ok)
        memcpy(out, &sym, sizeof sym);
    return ok;
}
