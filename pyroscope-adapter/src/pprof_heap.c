/* SPDX-License-Identifier: MIT */
/* pprof encoding of a jemalloc heap dump (protobuf-c, generated from the
 * profiling package's profile.proto: meson.build, `protodir`). */
#define _GNU_SOURCE
#include "pprof_heap.h"

#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "profile.pb-c.h"
#include "u64map.h"

typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__ValueType ValueType;

typedef struct builder {
    char **strings;
    size_t nstrings, capstrings;
    mp_pyro_u64map string_index; /* FNV hash of the string -> index+1 (collisions checked) */
    Location **locs;
    size_t nlocs, caplocs;
    mp_pyro_u64map loc_index; /* address -> location index+1 */
    Function **funcs;
    size_t nfuncs, capfuncs;
    mp_pyro_u64map func_index; /* string index -> function index+1 */
    int oom;
} builder;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, c * elem);
    if (!n)
        return -1;
    *p = n;
    *cap = c;
    return 0;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static int64_t str(builder *b, const char *s)
{
    if (b->oom)
        return 0;
    uint64_t h = fnv(s);
    for (;; h++) { /* linear re-probe on a hash collision between different strings */
        bool found;
        size_t *slot = mp_pyro_u64map_slot(&b->string_index, h, &found);
        if (!slot) {
            b->oom = 1;
            return 0;
        }
        if (found) {
            if (strcmp(b->strings[*slot - 1], s) == 0)
                return (int64_t)(*slot - 1);
            continue;
        }
        if (grow((void **)&b->strings, &b->capstrings, b->nstrings + 1, sizeof *b->strings) != 0 ||
            !(b->strings[b->nstrings] = strdup(s))) {
            b->oom = 1;
            *slot = 0;
            return 0;
        }
        b->string_index.len++;
        *slot = ++b->nstrings;
        return (int64_t)(b->nstrings - 1);
    }
}

/* The Function of linkage name `name`: name = its human name by the
 * profiling library's rule (mp_prof_demangle: demangled and qualified,
 * as the mimprof backend names it), system_name = `name`. */
static uint64_t function_for(builder *b, const char *name)
{
    int64_t si = str(b, name);
    bool found;
    size_t *slot = b->oom ? NULL : mp_pyro_u64map_slot(&b->func_index, (uint64_t)si, &found);
    if (!slot) {
        b->oom = 1;
        return 0;
    }
    if (found)
        return *slot;
    Function *f = malloc(sizeof *f);
    if (!f || grow((void **)&b->funcs, &b->capfuncs, b->nfuncs + 1, sizeof *b->funcs) != 0) {
        free(f);
        b->oom = 1;
        *slot = 0;
        return 0;
    }
    perftools__profiles__function__init(f);
    f->id = b->nfuncs + 1;
    f->name = si;
    f->system_name = si;
    char human[4096];
    size_t len;
    if (mp_prof_demangle(name, human, sizeof human, &len) == MP_PROF_OK && len < sizeof human)
        f->name = str(b, human);
    b->funcs[b->nfuncs++] = f;
    b->func_index.len++;
    *slot = f->id;
    return f->id;
}

/* The symbol containing `addr`, from the dynamic symbol table only. */
static const char *symbol_of(uint64_t addr)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((void *)(uintptr_t)addr, &info, (void **)&sym, RTLD_DL_SYMENT) ||
        !info.dli_sname || !sym || !info.dli_saddr)
        return NULL;
    uint64_t lo = (uint64_t)(uintptr_t)info.dli_saddr;
    return addr >= lo && addr < lo + sym->st_size ? info.dli_sname : NULL;
}

static uint64_t location_for(builder *b, const mp_pyro_heap_options *o, uint64_t addr,
                             bool *resolved_by_map)
{
    bool found;
    size_t *slot = mp_pyro_u64map_slot(&b->loc_index, addr, &found);
    if (!slot) {
        b->oom = 1;
        return 0;
    }
    if (found)
        return *slot;
    Location *l = malloc(sizeof *l);
    Line *line = malloc(sizeof *line);
    Line **lines = malloc(sizeof *lines);
    if (!l || !line || !lines ||
        grow((void **)&b->locs, &b->caplocs, b->nlocs + 1, sizeof *b->locs) != 0) {
        free(l);
        free(line);
        free(lines);
        b->oom = 1;
        *slot = 0;
        return 0;
    }
    perftools__profiles__location__init(l);
    l->id = b->nlocs + 1;
    l->address = addr;
    const mp_pyro_mapping *m = mp_pyro_mapping_find(o->maps, o->nmaps, addr);
    if (m)
        l->mapping_id = (uint64_t)(m - o->maps) + 1;
    const char *name = o->symbolize ? symbol_of(addr) : NULL;
    if (name) {
        perftools__profiles__line__init(line);
        line->function_id = function_for(b, name);
        lines[0] = line;
        l->line = lines;
        l->n_line = 1;
    } else {
        free(line);
        free(lines);
        if (m)
            resolved_by_map[m - o->maps] = false;
    }
    b->locs[b->nlocs++] = l;
    b->loc_index.len++;
    *slot = l->id;
    return l->id;
}

static void builder_free(builder *b)
{
    for (size_t i = 0; i < b->nstrings; i++)
        free(b->strings[i]);
    free(b->strings);
    for (size_t i = 0; i < b->nlocs; i++) {
        if (b->locs[i]->n_line)
            free(b->locs[i]->line[0]);
        free(b->locs[i]->line);
        free(b->locs[i]);
    }
    free(b->locs);
    for (size_t i = 0; i < b->nfuncs; i++)
        free(b->funcs[i]);
    free(b->funcs);
    mp_pyro_u64map_free(&b->string_index);
    mp_pyro_u64map_free(&b->loc_index);
    mp_pyro_u64map_free(&b->func_index);
}

mp_pyro_status mp_pyro_heap_pprof(const mp_jeprof_dump *d, const mp_pyro_heap_options *o,
                                  uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    builder b = {0};
    str(&b, "");
    ValueType vt[2], *vtp[2] = {&vt[0], &vt[1]}, period_type;
    perftools__profiles__value_type__init(&vt[0]);
    perftools__profiles__value_type__init(&vt[1]);
    perftools__profiles__value_type__init(&period_type);
    vt[0].type = str(&b, "inuse_objects");
    vt[0].unit = str(&b, "count");
    vt[1].type = str(&b, "inuse_space");
    vt[1].unit = str(&b, "bytes");
    period_type.type = str(&b, "space");
    period_type.unit = str(&b, "bytes");

    bool *resolved = malloc((o->nmaps ? o->nmaps : 1) * sizeof *resolved);
    Sample *samples = calloc(d->nstacks ? d->nstacks : 1, sizeof *samples);
    Sample **sp = calloc(d->nstacks ? d->nstacks : 1, sizeof *sp);
    uint64_t *locids = malloc((d->nframes ? d->nframes : 1) * sizeof *locids);
    int64_t *values = malloc((d->nstacks ? d->nstacks : 1) * 2 * sizeof *values);
    mp_pyro_status st = MP_PYRO_E_NOMEM;
    if (!resolved || !samples || !sp || !locids || !values)
        goto out;
    for (size_t i = 0; i < o->nmaps; i++)
        resolved[i] = o->symbolize;
    size_t ns = 0, nloc = 0;
    for (size_t i = 0; i < d->nstacks && !b.oom; i++) {
        const mp_jeprof_stack *s = &d->stacks[i];
        double uo, ub;
        mp_jeprof_unbias(s->objs, s->bytes, d->period, &uo, &ub);
        int64_t vo = (int64_t)llround(uo), vb = (int64_t)llround(ub);
        if (vo == 0 && vb == 0)
            continue;
        const uint64_t *f = d->frames + s->frame_off;
        size_t k = 0;
        if (o->skip_object >= 0) {
            while (k < s->depth) {
                const mp_pyro_mapping *m = mp_pyro_mapping_find(o->maps, o->nmaps, f[k] - 1);
                if (!m || (int)m->object != o->skip_object)
                    break;
                k++;
            }
        }
        if (k == s->depth)
            k = 0; /* nothing but allocator frames: keep them rather than an empty stack */
        Sample *smp = &samples[ns];
        perftools__profiles__sample__init(smp);
        smp->location_id = locids + nloc;
        for (; k < s->depth; k++)
            locids[nloc + smp->n_location_id++] =
                location_for(&b, o, f[k] ? f[k] - 1 : 0, resolved);
        nloc += smp->n_location_id;
        smp->value = values + 2 * ns;
        smp->n_value = 2;
        smp->value[0] = vo;
        smp->value[1] = vb;
        sp[ns++] = smp;
    }
    Mapping *maps = calloc(o->nmaps ? o->nmaps : 1, sizeof *maps);
    Mapping **mp = calloc(o->nmaps ? o->nmaps : 1, sizeof *mp);
    int64_t comment = o->comment ? str(&b, o->comment) : 0;
    int64_t default_type = str(&b, "inuse_space");
    if (!maps || !mp || b.oom) {
        free(maps);
        free(mp);
        goto out;
    }
    for (size_t i = 0; i < o->nmaps; i++) {
        perftools__profiles__mapping__init(&maps[i]);
        maps[i].id = i + 1;
        maps[i].memory_start = o->maps[i].start;
        maps[i].memory_limit = o->maps[i].limit;
        maps[i].file_offset = o->maps[i].offset;
        maps[i].filename = str(&b, o->maps[i].file);
        maps[i].build_id = str(&b, o->maps[i].build_id);
        maps[i].has_functions = resolved[i];
        mp[i] = &maps[i];
    }
    if (b.oom) {
        free(maps);
        free(mp);
        goto out;
    }
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_sample_type = 2;
    p.sample_type = vtp;
    p.n_sample = ns;
    p.sample = sp;
    p.n_mapping = o->nmaps;
    p.mapping = mp;
    p.n_location = b.nlocs;
    p.location = b.locs;
    p.n_function = b.nfuncs;
    p.function = b.funcs;
    p.n_string_table = b.nstrings;
    p.string_table = b.strings;
    p.time_nanos = o->time_nanos;
    p.duration_nanos = o->duration_nanos;
    p.period_type = &period_type;
    p.period = (int64_t)d->period;
    p.default_sample_type = default_type;
    if (o->comment) {
        p.n_comment = 1;
        p.comment = &comment;
    }
    size_t n = perftools__profiles__profile__get_packed_size(&p);
    *out = malloc(n ? n : 1);
    if (*out) {
        *len = perftools__profiles__profile__pack(&p, *out);
        st = MP_PYRO_OK;
    }
    free(maps);
    free(mp);
out:
    free(resolved);
    free(samples);
    free(sp);
    free(locids);
    free(values);
    builder_free(&b);
    return st;
}
