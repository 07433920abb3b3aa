/* SPDX-License-Identifier: MIT */
/* Function names from ELF symbol tables (syms_state.h): the object's own
 * .symtab, a separate debug file's, or its .dynsym; and where separate
 * debug files live. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../platform/platform.h"
#include "syms_state.h"

const char *mp_syms_file(const mp_obj *o) { return o->sym_path != NULL ? o->sym_path : o->path; }

struct mp_obj_syms *mp_syms_of_obj(mp_obj *o)
{
    if (o->syms == NULL)
        o->syms = calloc(1, sizeof *o->syms);
    return o->syms;
}

/* Objects that are not ELF files (Mach-O), and addresses outside every
 * mapping where the platform has no loader enumeration: the name the
 * platform layer verified to be the containing function's, else none. */
const char *mp_syms_native_name(mp_syms *s, uintptr_t addr)
{
    return mp_syms_intern(s, mp_plat_function_name(addr));
}

/* Where separate debug files live: $MIMPROF_DEBUG_ROOT, else
 * /usr/lib/debug. Offline only: a profiler never asks a debuginfod server.
 * Copied from the initial environment when the library is loaded, before
 * the program's main: not through getenv() on the reporter thread, which
 * in bash is bash's own getenv racing bash's main thread, and not kept as
 * a pointer into an environment the program may rewrite or free. */
static char g_debug_root[1024] = "/usr/lib/debug"; /* longer roots are ignored */

__attribute__((constructor)) static void debug_root_init(void)
{
    static const char key[] = "MIMPROF_DEBUG_ROOT=";
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, key, sizeof key - 1) != 0)
            continue;
        const char *v = *e + sizeof key - 1;
        if (v[0] == '/' && strlen(v) < sizeof g_debug_root)
            memcpy(g_debug_root, v, strlen(v) + 1);
        return;
    }
}

const char *mp_syms_debug_root(void) { return g_debug_root; }

/* The .symtab of the object's separate debug file, if one is installed
 * with functions in it. */
static bool debug_symtab(const mp_obj *o, mp_elf_symtab *out)
{
    if (strlen(o->build_id) < 4)
        return false;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", mp_syms_debug_root(),
                     o->build_id, o->build_id + 2);
    if (n <= 0 || (size_t)n >= sizeof path)
        return false;
    if (mp_elf_read_symbols_file(path, o->build_id, MP_ELF_FROM_SYMTAB, out) == MP_ELF_OK &&
        out->count != 0)
        return true;
    mp_elf_symtab_free(out);
    return false;
}

/* The object's function symbols: its own .symtab, else the .symtab of the
 * separate debug file its build-id names (ROOT/.build-id/xx/yyyy.debug,
 * which distributions ship apart: Debian's -dbg and -dbgsym packages; only
 * there are a stripped library's local functions, e.g. libc's
 * __libc_start_call_main), else its .dynsym. The debug file must carry the
 * same build-id. The .dynsym is read last, only when needed: reading it
 * first and dropping it for the debug file cost a sort of libc's 2,900
 * exported functions in every report. */
static void read_symtab(const mp_obj *o, mp_elf_symtab *out)
{
    if (mp_elf_read_symbols_file(mp_syms_file(o), o->build_id, MP_ELF_FROM_SYMTAB, out) ==
        MP_ELF_OK)
        return;
    if (debug_symtab(o, out))
        return;
    mp_elf_read_symbols_file(mp_syms_file(o), o->build_id, MP_ELF_FROM_DYNSYM, out);
}

const char *mp_syms_elf_name(mp_syms *s, mp_obj *o, uintptr_t addr)
{
    struct mp_obj_syms *os = mp_syms_of_obj(o);
    if (os == NULL || !o->has_file)
        return NULL;
    if (!os->symtab_tried) {
        os->symtab_tried = true;
        read_symtab(o, &os->symtab);
        s->symtab_bytes += mp_elf_symtab_bytes(&os->symtab);
    }
    const mp_elf_sym *sym = mp_elf_symtab_lookup(&os->symtab, (uint64_t)(addr - o->base));
    return sym ? mp_syms_intern(s, os->symtab.names + sym->name) : NULL;
}
