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
           s->humans_cap * sizeof *s->humans + s->symtab_bytes;
}

void mp_syms_trim(mp_syms *s, mp_maps *m, size_t budget)
{
    if (mp_syms_bytes(s) <= budget)
        return;
    mp_syms_clear_addresses(s);
    for (size_t i = 0; i < m->nobjs && mp_syms_bytes(s) > budget; i++)
        mp_syms_forget_obj(s, m->objs[i]);
}

static bool grow_strs(mp_syms *s)
{
    size_t nc = s->strs_cap ? s->strs_cap * 2 : 1024;
    const char **t = calloc(nc, sizeof *t);
    if (t == NULL)
        return false;
    for (size_t i = 0; i < s->strs_cap; i++) {
        const char *v = s->strs[i];
        if (v == NULL)
            continue;
        size_t j = mp_hash_str(v) & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = v;
    }
    free(s->strs);
    s->strs = t;
    s->strs_cap = nc;
    return true;
}

const char *mp_syms_intern(mp_syms *s, const char *str)
{
    if (str == NULL || str[0] == '\0')
        return NULL;
    if ((s->nstrs + 1) * 2 > s->strs_cap && !grow_strs(s))
        return NULL;
    size_t j = mp_hash_str(str) & (s->strs_cap - 1);
    while (s->strs[j]) {
        if (strcmp(s->strs[j], str) == 0)
            return s->strs[j];
        j = (j + 1) & (s->strs_cap - 1);
    }
    size_t len = strlen(str) + 1;
    char *copy = mp_arena_alloc(&s->mem, len);
    if (copy == NULL)
        return NULL;
    memcpy(copy, str, len);
    s->strs[j] = copy;
    s->nstrs++;
    return copy;
}

static human_slot *human_slot_of(mp_syms *s, const char *sys)
{
    size_t j = mp_hash_ptr((uintptr_t)sys) & (s->humans_cap - 1);
    while (s->humans[j].sys != NULL && s->humans[j].sys != sys)
        j = (j + 1) & (s->humans_cap - 1);
    return &s->humans[j];
}

static bool grow_humans(mp_syms *s)
{
    size_t nc = s->humans_cap ? s->humans_cap * 2 : 256;
    human_slot *old = s->humans;
    size_t oc = s->humans_cap;
    s->humans = calloc(nc, sizeof *s->humans);
    if (s->humans == NULL) {
        s->humans = old;
        return false;
    }
    s->humans_cap = nc;
    for (size_t i = 0; i < oc; i++)
        if (old[i].sys != NULL)
            *human_slot_of(s, old[i].sys) = old[i];
    free(old);
    return true;
}

/* Human names are cached with the strings, by the linkage name's pointer. */
void mp_syms_set_name(mp_syms *s, mp_frame *f, const char *sys)
{
    f->func = sys;
    f->sysname = NULL;
    if (sys == NULL || !mp_demangle_looks_mangled(sys))
        return;
    if ((s->nhumans + 1) * 2 > s->humans_cap && !grow_humans(s))
        return; /* out of memory: the linkage name serves */
    human_slot *h = human_slot_of(s, sys);
    if (h->sys == NULL) {
        char buf[8192];
        long n = mp_demangle(sys, buf, sizeof buf);
        h->sys = sys;
        h->human = n > 0 && (size_t)n < sizeof buf ? mp_syms_intern(s, buf) : NULL;
        s->nhumans++;
    }
    if (h->human != NULL && h->human != sys) {
        f->func = h->human;
        f->sysname = sys;
    }
}

static mp_pcinfo **pc_slot(mp_syms *s, uintptr_t addr)
{
    size_t j = mp_hash_ptr(addr) & (s->pcs_cap - 1);
    while (s->pcs[j] && s->pcs[j]->addr != addr)
        j = (j + 1) & (s->pcs_cap - 1);
    return &s->pcs[j];
}

static bool grow_pcs(mp_syms *s)
{
    size_t nc = s->pcs_cap ? s->pcs_cap * 2 : 1024;
    mp_pcinfo **old = s->pcs;
    size_t oc = s->pcs_cap;
    s->pcs = calloc(nc, sizeof *s->pcs);
    if (s->pcs == NULL) {
        s->pcs = old;
        return false;
    }
    s->pcs_cap = nc;
    for (size_t i = 0; i < oc; i++)
        if (old[i])
            *pc_slot(s, old[i]->addr) = old[i];
    free(old);
    return true;
}

const mp_pcinfo *mp_syms_resolve(mp_syms *s, mp_obj *o, uintptr_t addr, mp_prof_symbolize mode,
                                 bool local)
{
    if ((s->npcs + 1) * 2 > s->pcs_cap && !grow_pcs(s))
        return NULL;
    mp_pcinfo **slot = pc_slot(s, addr);
    if (*slot != NULL && (*slot)->mode == (uint8_t)mode)
        return *slot;

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
    mp_pcinfo *pi = *slot;
    if (pi == NULL) {
        pi = mp_arena_alloc(&s->mem, sizeof *pi);
        if (pi == NULL)
            return NULL;
        s->npcs++;
    }
    pi->addr = addr;
    pi->mode = (uint8_t)mode;
    pi->flags = flags;
    pi->nframes = (uint16_t)k;
    pi->frames = NULL;
    if (k > 0) {
        pi->frames = mp_arena_alloc(&s->mem, (size_t)k * sizeof *pi->frames);
        if (pi->frames == NULL) {
            pi->nframes = 0;
            pi->mode = 0xff; /* resolved again next time */
            *slot = pi;
            return NULL;
        }
        memcpy(pi->frames, fr, (size_t)k * sizeof *fr);
    }
    *slot = pi;
    return pi;
}
