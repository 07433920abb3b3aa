/* SPDX-License-Identifier: MIT */
/* The string and function tables of one pprof profile (pprof_tables.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "builder_state.h"
#include "pprof_tables.h"

/* Makes room for one more element in an index of 1-based element numbers
 * (0: empty slot) that stays at most half full: rebuilt at twice its
 * capacity (256 at first) from the n elements, element i placed by
 * hash(table, i). */
static bool index_room(uint32_t **tab, size_t *cap, size_t n,
                       size_t (*hash)(const void *table, size_t i), const void *table)
{
    if ((n + 1) * 2 <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 256;
    uint32_t *idx = calloc(nc, sizeof *idx);
    if (idx == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        size_t j = hash(table, i) & (nc - 1);
        while (idx[j])
            j = (j + 1) & (nc - 1);
        idx[j] = (uint32_t)i + 1;
    }
    free(*tab);
    *tab = idx;
    *cap = nc;
    return true;
}

static size_t st_hash(const void *table, size_t i)
{
    return (size_t)mp_hash_str(((const mp_strtab *)table)->v[i]);
}

int64_t mp_strtab_idx(mp_strtab *t, const char *s)
{
    if (s == NULL)
        s = "";
    if (!index_room(&t->tab, &t->tab_cap, t->n, st_hash, t))
        return -1;
    size_t j = mp_hash_str(s) & (t->tab_cap - 1);
    while (t->tab[j]) {
        if (strcmp(t->v[t->tab[j] - 1], s) == 0)
            return t->tab[j] - 1;
        j = (j + 1) & (t->tab_cap - 1);
    }
    if (!mp_report_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return -1;
    t->v[t->n] = (char *)s;
    t->tab[j] = (uint32_t)++t->n;
    return (int64_t)t->n - 1;
}

static uint64_t fn_key(int64_t name, int64_t sys, int64_t file)
{
    return ((uint64_t)name << 32) ^ ((uint64_t)sys * 0x9E3779B97F4A7C15ull) ^ (uint64_t)file;
}

static size_t fn_hash(const void *table, size_t i)
{
    const Perftools__Profiles__Function *f = &((const mp_fntab *)table)->v[i];
    return mp_hash_mix(fn_key(f->name, f->system_name, f->filename));
}

uint64_t mp_fntab_id(mp_fntab *t, int64_t name, int64_t sys, int64_t file)
{
    if (!index_room(&t->tab, &t->tab_cap, t->n, fn_hash, t))
        return 0;
    size_t j = mp_hash_mix(fn_key(name, sys, file)) & (t->tab_cap - 1);
    while (t->tab[j]) {
        Perftools__Profiles__Function *f = &t->v[t->tab[j] - 1];
        if (f->name == name && f->system_name == sys && f->filename == file)
            return f->id;
        j = (j + 1) & (t->tab_cap - 1);
    }
    if (!mp_report_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return 0;
    Perftools__Profiles__Function init = PERFTOOLS__PROFILES__FUNCTION__INIT;
    Perftools__Profiles__Function *f = &t->v[t->n];
    *f = init;
    f->id = t->n + 1;
    f->name = name;
    f->system_name = sys;
    f->filename = file;
    t->tab[j] = (uint32_t)++t->n;
    return f->id;
}

void mp_strtab_free(mp_strtab *t)
{
    free(t->v);
    free(t->tab);
}

void mp_fntab_free(mp_fntab *t)
{
    free(t->v);
    free(t->tab);
}
