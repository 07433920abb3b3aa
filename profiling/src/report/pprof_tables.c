/* SPDX-License-Identifier: MIT */
/* The string and function tables of one pprof profile (pprof_tables.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "../hash.h"
#include "../index.h"
#include "pprof_tables.h"

int64_t mp_strtab_idx(mp_strtab *t, const char *s)
{
    if (s == NULL)
        s = "";
    if (!mp_index_reserve(&t->ix))
        return -1;
    mp_index_probe p = mp_index_start(&t->ix, mp_hash_str(s));
    uint32_t i;
    while (mp_index_next(&p, &i))
        if (strcmp(t->v[i], s) == 0)
            return i;
    if (!mp_array_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return -1;
    t->v[t->n] = (char *)s;
    mp_index_put(&t->ix, &p, (uint32_t)t->n);
    return (int64_t)t->n++;
}

static uint64_t fn_key(int64_t name, int64_t sys, int64_t file)
{
    return ((uint64_t)name << 32) ^ ((uint64_t)sys * 0x9E3779B97F4A7C15ull) ^ (uint64_t)file;
}

uint64_t mp_fntab_id(mp_fntab *t, int64_t name, int64_t sys, int64_t file)
{
    if (!mp_index_reserve(&t->ix))
        return 0;
    mp_index_probe p = mp_index_start(&t->ix, mp_hash_mix(fn_key(name, sys, file)));
    uint32_t i;
    while (mp_index_next(&p, &i)) {
        const Perftools__Profiles__Function *f = &t->v[i];
        if (f->name == name && f->system_name == sys && f->filename == file)
            return f->id;
    }
    if (!mp_array_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v))
        return 0;
    Perftools__Profiles__Function init = PERFTOOLS__PROFILES__FUNCTION__INIT;
    Perftools__Profiles__Function *f = &t->v[t->n];
    *f = init;
    f->id = t->n + 1;
    f->name = name;
    f->system_name = sys;
    f->filename = file;
    mp_index_put(&t->ix, &p, (uint32_t)t->n++);
    return f->id;
}

void mp_strtab_free(mp_strtab *t)
{
    free(t->v);
    mp_index_free(&t->ix);
}

void mp_fntab_free(mp_fntab *t)
{
    free(t->v);
    mp_index_free(&t->ix);
}
