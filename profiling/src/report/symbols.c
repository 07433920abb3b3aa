/* SPDX-License-Identifier: MIT */
/* Report-time symbolization (see symbols.h): the symbolizer's state, its
 * interned strings and human names, the pc cache, and mp_syms_resolve,
 * which asks syms_elf.c or syms_dwarf.c by mode. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "symbols.h"

#include <stdlib.h>
#include <string.h>

#include "../hash.h"
#include "../index.h"
#include "demangle.h"
#include "syms_state.h"

bool mp_syms_have_lines(void)
{
#if MP_HAVE_LIBDW
    return true;
#else
    return false;
#endif
}

mp_syms *mp_syms_new(void) { return calloc(1, sizeof(mp_syms)); }

void mp_syms_clear_addresses(mp_syms *s)
{
    mp_arena_clear(&s->mem);
    free(s->strs);
    free(s->pcs);
    free(s->humans);
    mp_index_free(&s->strs_ix);
    mp_index_free(&s->pcs_ix);
    mp_index_free(&s->humans_ix);
    s->strs = NULL;
    s->pcs = NULL;
    s->humans = NULL;
    s->nstrs = s->strs_cap = s->npcs = s->pcs_cap = s->nhumans = s->humans_cap = 0;
}

void mp_syms_free(mp_syms *s)
{
    if (s == NULL)
        return;
    mp_syms_clear_addresses(s);
    free(s);
}

void mp_syms_forget_obj(mp_syms *s, mp_obj *o)
{
    struct mp_obj_syms *os = o->syms;
    if (os == NULL)
        return;
    if (s != NULL)
        s->symtab_bytes -= mp_elf_symtab_bytes(&os->symtab);
    mp_elf_symtab_free(&os->symtab);
#if MP_HAVE_LIBDW
    mp_syms_dwarf_forget(s, os);
#endif
    free(os);
    o->syms = NULL;
}

size_t mp_syms_bytes(const mp_syms *s)
{
    if (s == NULL)
        return 0;
    return sizeof *s + s->mem.bytes + s->strs_cap * sizeof *s->strs + s->pcs_cap * sizeof *s->pcs +
           s->humans_cap * sizeof *s->humans + mp_index_bytes(&s->strs_ix) +
           mp_index_bytes(&s->pcs_ix) + mp_index_bytes(&s->humans_ix) + s->symtab_bytes;
}

void mp_syms_trim(mp_syms *s, mp_maps *m, size_t budget)
{
    if (mp_syms_bytes(s) <= budget)
        return;
    mp_syms_clear_addresses(s);
    for (size_t i = 0; i < m->nobjs && mp_syms_bytes(s) > budget; i++)
        mp_syms_forget_obj(s, m->objs[i]);
}

const char *mp_syms_intern(mp_syms *s, const char *str)
{
    if (str == NULL || str[0] == '\0' || !mp_index_reserve(&s->strs_ix))
        return NULL;
    mp_index_probe p = mp_index_start(&s->strs_ix, mp_hash_str(str));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (strcmp(s->strs[i], str) == 0)
            return s->strs[i];
    size_t len = strlen(str) + 1;
    char *copy = NULL;
    if (mp_array_reserve((void **)&s->strs, &s->strs_cap, s->nstrs + 1, sizeof *s->strs))
        copy = mp_arena_alloc(&s->mem, len);
    if (copy == NULL)
        return NULL;
    memcpy(copy, str, len);
    s->strs[s->nstrs] = copy;
    mp_index_put(&s->strs_ix, &p, (uint32_t)s->nstrs++);
    return copy;
}

/* The human name of an interned linkage name, demangled on first sight;
 * NULL when the demangler refuses it or out of memory. */
static const char *human_of(mp_syms *s, const char *sys)
{
    if (!mp_index_reserve(&s->humans_ix))
        return NULL;
    mp_index_probe p = mp_index_start(&s->humans_ix, mp_hash_ptr((uintptr_t)sys));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (s->humans[i].sys == sys)
            return s->humans[i].human;
    if (!mp_array_reserve((void **)&s->humans, &s->humans_cap, s->nhumans + 1, sizeof *s->humans))
        return NULL;
    char buf[8192];
    long n = mp_demangle(sys, buf, sizeof buf);
    const char *human = n > 0 && (size_t)n < sizeof buf ? mp_syms_intern(s, buf) : NULL;
    s->humans[s->nhumans] = (human_slot){sys, human};
    mp_index_put(&s->humans_ix, &p, (uint32_t)s->nhumans++);
    return human;
}

/* Human names are cached with the strings, by the linkage name's pointer. */
void mp_syms_set_name(mp_syms *s, mp_frame *f, const char *sys)
{
    f->func = sys;
    f->sysname = NULL;
    if (sys == NULL || !mp_demangle_looks_mangled(sys))
        return;
    const char *human = human_of(s, sys); /* NULL: the linkage name serves */
    if (human != NULL && human != sys) {
        f->func = human;
        f->sysname = sys;
    }
}

/* The cached entry of `addr`, made (mode 0xff: not resolved) on first
 * sight; NULL on out-of-memory. */
static mp_pcinfo *pc_entry(mp_syms *s, uintptr_t addr)
{
    if (!mp_index_reserve(&s->pcs_ix))
        return NULL;
    mp_index_probe p = mp_index_start(&s->pcs_ix, mp_hash_ptr(addr));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (s->pcs[i]->addr == addr)
            return s->pcs[i];
    mp_pcinfo *pi = NULL;
    if (mp_array_reserve((void **)&s->pcs, &s->pcs_cap, s->npcs + 1, sizeof *s->pcs))
        pi = mp_arena_alloc(&s->mem, sizeof *pi);
    if (pi == NULL)
        return NULL;
    *pi = (mp_pcinfo){.addr = addr, .mode = 0xff};
    s->pcs[s->npcs] = pi;
    mp_index_put(&s->pcs_ix, &p, (uint32_t)s->npcs++);
    return pi;
}

const mp_pcinfo *mp_syms_resolve(mp_syms *s, mp_obj *o, uintptr_t addr, mp_prof_symbolize mode,
                                 bool local)
{
    mp_pcinfo *pi = pc_entry(s, addr);
    if (pi == NULL || pi->mode == (uint8_t)mode)
        return pi;

    mp_frame fr[MP_SYMS_MAX_INLINE];
    int k = 0;
    uint8_t flags = 0;
    if (mode != MP_PROF_SYMBOLIZE_NONE && local && (o == NULL || o->native_names)) {
        mp_syms_set_name(s, &fr[0], mp_syms_native_name(s, addr));
        fr[0].file = NULL;
        fr[0].line = 0;
        k = fr[0].func != NULL;
    } else if (o != NULL && mode != MP_PROF_SYMBOLIZE_NONE) {
#if MP_HAVE_LIBDW
        if (mode == MP_PROF_SYMBOLIZE_LINES)
            k = mp_syms_dwarf_frames(s, o, addr, fr, &flags);
#endif
        if (k <= 0) {
            const char *name = mp_syms_elf_name(s, o, addr);
            k = 0;
            if (name != NULL) {
                mp_syms_set_name(s, &fr[0], name);
                fr[0].file = NULL;
                fr[0].line = 0;
                k = 1;
            }
        }
    }
    pi->mode = (uint8_t)mode;
    pi->flags = flags;
    pi->nframes = (uint16_t)k;
    pi->frames = NULL;
    if (k > 0) {
        pi->frames = mp_arena_alloc(&s->mem, (size_t)k * sizeof *pi->frames);
        if (pi->frames == NULL) {
            pi->nframes = 0;
            pi->mode = 0xff; /* resolved again next time */
            return NULL;
        }
        memcpy(pi->frames, fr, (size_t)k * sizeof *fr);
    }
    return pi;
}
