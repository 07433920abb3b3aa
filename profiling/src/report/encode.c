/* SPDX-License-Identifier: MIT */
/* The report encoder: a builder's samples -> pprof bytes (report_builder.h).
 *
 * Location addresses: the recorder hands return addresses; a Location's
 * address is that return address minus one, i.e. inside the call
 * instruction (profile.proto allows it for non-leaf frames), so that
 * symbolization here and on a server names the line of the call. Every
 * frame handed to the builder is a call site (the profiler's frames are
 * cut before), so the adjustment applies to all of them.
 *
 * Allocator frames: after the locations are named, the stacks are pruned
 * at the process's drop pattern (drop.h, prune.c) and the profile names
 * the pattern in drop_frames; only the locations the pruned stacks still
 * reference are written, numbered densely.
 *
 * mp_report_finish runs the steps below in order over one `enc`; each
 * step returns false on out-of-memory and the encoding stops there.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../age.h"
#include "builder_state.h"
#include "drop.h"
#include "pprof_tables.h"
#include "quality.h"

/* What the locations of one mapping say, for its has_* flags. */
typedef struct mapflags {
    size_t locations;
    bool fn, file, line, inl;
} mapflags;

typedef struct enc {
    mp_report_builder *b;
    mp_maps *maps;
    mp_prof_symbolize mode;
    mp_strtab strs;
    mp_fntab fns;
    size_t nmap, nlines;
    uint64_t q_frames, q_named, q_lined; /* for mp_quality_from_counts */
    const mp_pcinfo **info;              /* per location; NULL = unsymbolized */
    uint32_t *loc_map;                   /* per location: mapping id, 0 = none */
    uint16_t *skip;                      /* per location: inner frames pruned (prune.c) */
    uint64_t *newid;                     /* per location: its Location id, 0 = not written */
    size_t nused;                        /* locations written */
    mp_drop drop;                        /* the drop pattern (drop.h) */
    int64_t drop_idx;                    /* its string index */
    mapflags *mf;                        /* per mapping */
    Perftools__Profiles__Location *locs, **locp;
    Perftools__Profiles__Line *lines, **linep;
    Perftools__Profiles__Sample *smp, **smpp;
    uint64_t *locids;
    int64_t *vals;
    int first; /* first value encoded: MP_VAL_INUSE_OBJECTS for inuse_only */
    Perftools__Profiles__Mapping *maparr, **mapp;
    Perftools__Profiles__Function **fnp;
    Perftools__Profiles__ValueType vt[MP_VAL_COUNT], *vtp[MP_VAL_COUNT], period_type;
    Perftools__Profiles__Label label, *labelp;
    /* One `age` label per bucket, shared by the samples of that bucket. */
    Perftools__Profiles__Label age_label[MP_AGE_BUCKETS], *age_labelp[MP_AGE_BUCKETS];
    int64_t *comment_idx; /* string indices of the builder's comments */
} enc;

#define NONZERO(n) ((n) != 0 ? (n) : 1)

static bool enc_alloc(enc *e)
{
    const mp_report_builder *b = e->b;
    e->info = calloc(NONZERO(b->nloc), sizeof *e->info);
    e->loc_map = calloc(NONZERO(b->nloc), sizeof *e->loc_map);
    e->mf = calloc(NONZERO(e->nmap), sizeof *e->mf);
    e->smp = calloc(NONZERO(b->nsmp), sizeof *e->smp);
    e->smpp = calloc(NONZERO(b->nsmp), sizeof *e->smpp);
    e->locids = calloc(NONZERO(b->nstk), sizeof *e->locids);
    e->vals = calloc(NONZERO(b->nsmp * MP_VAL_COUNT), sizeof *e->vals);
    e->maparr = calloc(NONZERO(e->nmap), sizeof *e->maparr);
    e->mapp = calloc(NONZERO(e->nmap), sizeof *e->mapp);
    return e->info && e->loc_map && e->mf && e->smp && e->smpp && e->locids && e->vals &&
           e->maparr && e->mapp && mp_strtab_idx(&e->strs, "") == 0;
}

static void enc_free(enc *e)
{
    free(e->info);
    free(e->loc_map);
    free(e->skip);
    free(e->newid);
    free(e->mf);
    free(e->locs);
    free(e->locp);
    free(e->lines);
    free(e->linep);
    free(e->smp);
    free(e->smpp);
    free(e->locids);
    free(e->vals);
    free(e->maparr);
    free(e->mapp);
    free(e->fnp);
    free(e->comment_idx);
    mp_fntab_free(&e->fns);
    mp_strtab_free(&e->strs);
}

/* Folds one written location's frames (those after the `skip` pruned
 * ones) into its mapping's has_* flags. */
static void note_mapping(enc *e, uint32_t map_id, const mp_pcinfo *pi, size_t skip)
{
    size_t nf = pi ? pi->nframes - skip : 0;
    const mp_frame *fr = nf > 0 ? pi->frames + skip : NULL; /* frames may be NULL when none */
    bool fn = nf > 0, file = nf > 0, line = nf > 0;
    for (size_t k = 0; k < nf; k++) {
        fn = fn && fr[k].func != NULL;
        file = file && fr[k].file != NULL;
        line = line && fr[k].line > 0;
        e->q_named += fr[k].func != NULL;
        e->q_lined += fr[k].file != NULL && fr[k].line > 0;
    }
    e->q_frames += nf ? nf : 1;
    if (map_id == 0)
        return;
    mapflags *m = &e->mf[map_id - 1];
    if (m->locations++ == 0)
        m->fn = m->file = m->line = m->inl = true;
    m->fn = m->fn && fn;
    m->file = m->file && file;
    m->line = m->line && line;
    m->inl = m->inl && pi != NULL && (pi->flags & MP_PC_INLINE);
}

/* Resolves every location once: its mapping and (by mode) its frames. */
static bool resolve_locations(enc *e)
{
    const mp_report_builder *b = e->b;
    mp_maps *maps = e->maps;
    for (size_t i = 0; i < b->nloc; i++) {
        if ((uint32_t)i == b->marker)
            continue;
        uintptr_t addr = b->loc_pc[i] - 1;
        const mp_map_ref *ref = mp_maps_lookup(maps, addr);
        e->loc_map[i] = ref ? ref->id : 0;
        if (e->mode != MP_PROF_SYMBOLIZE_NONE) {
            mp_obj *o = ref ? maps->objs[ref->obj] : NULL;
            e->info[i] = mp_syms_resolve(b->c->syms, o, addr, e->mode, !maps->fixed);
            if (e->info[i] == NULL)
                return false;
        }
    }
    return true;
}

/* Prunes the stacks (prune.c), then numbers the locations they still
 * reference and folds those into the mapping flags and quality counts. */
static bool prune_locations(enc *e)
{
    mp_report_builder *b = e->b;
    if ((e->skip = calloc(NONZERO(b->nloc), sizeof *e->skip)) == NULL ||
        (e->newid = calloc(NONZERO(b->nloc), sizeof *e->newid)) == NULL)
        return false;
    if (e->drop.ready && e->mode != MP_PROF_SYMBOLIZE_NONE &&
        !mp_report_prune(b, &e->drop, e->info, e->skip))
        return false;
    for (size_t s = 0; s < b->nsmp; s++)
        for (size_t k = 0; k < b->smp[s].depth; k++) {
            uint32_t l = b->stk[b->smp[s].off + k];
            if (e->newid[l] != 0)
                continue;
            e->newid[l] = ++e->nused;
            if (l == b->marker) {
                e->nlines++;
                continue;
            }
            const mp_pcinfo *pi = e->info[l];
            e->nlines += pi ? pi->nframes - e->skip[l] : 0;
            note_mapping(e, e->loc_map[l], pi, e->skip[l]);
        }
    e->locs = calloc(NONZERO(e->nused), sizeof *e->locs);
    e->locp = calloc(NONZERO(e->nused), sizeof *e->locp);
    return e->locs != NULL && e->locp != NULL;
}

/* The header's strings first, so the table reads well: sample types,
 * period type, the interval samples' label, the age labels, comments. */
static bool header_strings(enc *e)
{
    static const char *const types[MP_VAL_COUNT][2] = {{"alloc_objects", "count"},
                                                       {"alloc_space", "bytes"},
                                                       {"inuse_objects", "count"},
                                                       {"inuse_space", "bytes"}};
    const Perftools__Profiles__ValueType vinit = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    bool ok = true;
    for (int k = 0; k < MP_VAL_COUNT; k++) {
        e->vt[k] = vinit;
        e->vt[k].type = mp_strtab_idx(&e->strs, types[k][0]);
        e->vt[k].unit = mp_strtab_idx(&e->strs, types[k][1]);
        e->vtp[k] = &e->vt[k];
        ok = ok && e->vt[k].type >= 0 && e->vt[k].unit >= 0;
    }
    e->period_type = vinit;
    e->period_type.type = mp_strtab_idx(&e->strs, "space");
    e->period_type.unit = mp_strtab_idx(&e->strs, "bytes");
    const Perftools__Profiles__Label linit = PERFTOOLS__PROFILES__LABEL__INIT;
    e->label = linit;
    e->labelp = &e->label;
    e->label.key = mp_strtab_idx(&e->strs, "__delta__");
    e->label.str = mp_strtab_idx(&e->strs, "false");
    for (unsigned k = 0; k < MP_AGE_BUCKETS; k++) {
        e->age_label[k] = linit;
        e->age_label[k].key = mp_strtab_idx(&e->strs, "age");
        e->age_label[k].num = mp_age_bucket_seconds(k);
        e->age_label[k].num_unit = mp_strtab_idx(&e->strs, "seconds");
        e->age_labelp[k] = &e->age_label[k];
        ok = ok && e->age_label[k].key >= 0 && e->age_label[k].num_unit >= 0;
    }
    const mp_report_builder *b = e->b;
    if (b->ncomments != 0 &&
        (e->comment_idx = calloc(b->ncomments, sizeof *e->comment_idx)) == NULL)
        return false;
    for (size_t i = 0; i < b->ncomments; i++)
        ok = ok && (e->comment_idx[i] = mp_strtab_idx(&e->strs, b->comments[i])) >= 0;
    if (e->drop.pattern != NULL)
        ok = ok && (e->drop_idx = mp_strtab_idx(&e->strs, e->drop.pattern)) >= 0;
    return ok && e->period_type.type >= 0 && e->period_type.unit >= 0 && e->label.key >= 0 &&
           e->label.str >= 0;
}

/* Mappings, in id order (objects in mp_maps order, segments in order). */
static bool encode_mappings(enc *e)
{
    const mp_maps *maps = e->maps;
    size_t id = 0;
    for (size_t i = 0; i < maps->nobjs; i++) {
        const mp_obj *o = maps->objs[i];
        for (size_t j = 0; j < o->nsegs; j++, id++) {
            const Perftools__Profiles__Mapping init = PERFTOOLS__PROFILES__MAPPING__INIT;
            Perftools__Profiles__Mapping *m = &e->maparr[id];
            *m = init;
            m->id = id + 1;
            m->memory_start = o->segs[j].start;
            m->memory_limit = o->segs[j].limit;
            m->file_offset = o->segs[j].file_offset;
            m->filename = mp_strtab_idx(&e->strs, o->path);
            m->build_id = mp_strtab_idx(&e->strs, o->build_id);
            if (m->filename < 0 || m->build_id < 0)
                return false;
            if (e->mf[id].locations > 0) {
                m->has_functions = e->mf[id].fn;
                m->has_filenames = e->mf[id].file;
                m->has_line_numbers = e->mf[id].line;
                m->has_inline_frames = e->mf[id].inl;
            }
            e->mapp[id] = m;
        }
    }
    return true;
}

/* Appends one Line of function (name, sys, file) to location l. */
static bool add_line(enc *e, Perftools__Profiles__Location *l, size_t *li, const char *func,
                     const char *sysname, const char *file, int64_t line)
{
    int64_t name = mp_strtab_idx(&e->strs, func);
    int64_t sys = sysname != NULL ? mp_strtab_idx(&e->strs, sysname) : name;
    int64_t fidx = file != NULL ? mp_strtab_idx(&e->strs, file) : 0;
    uint64_t fid = (name < 0 || sys < 0 || fidx < 0) ? 0 : mp_fntab_id(&e->fns, name, sys, fidx);
    if (fid == 0)
        return false;
    const Perftools__Profiles__Line init = PERFTOOLS__PROFILES__LINE__INIT;
    e->lines[*li] = init;
    e->lines[*li].function_id = fid;
    e->lines[*li].line = line;
    e->linep[*li] = &e->lines[*li];
    (*li)++;
    l->n_line++;
    return true;
}

/* Locations with their lines, and the function table they name. */
static bool encode_locations(enc *e)
{
    const mp_report_builder *b = e->b;
    e->lines = calloc(NONZERO(e->nlines), sizeof *e->lines);
    e->linep = calloc(NONZERO(e->nlines), sizeof *e->linep);
    if (!e->lines || !e->linep)
        return false;
    size_t li = 0;
    for (size_t i = 0; i < b->nloc; i++) {
        if (e->newid[i] == 0)
            continue; /* no stack references it (pruned) */
        const Perftools__Profiles__Location init = PERFTOOLS__PROFILES__LOCATION__INIT;
        Perftools__Profiles__Location *l = &e->locs[e->newid[i] - 1];
        *l = init;
        l->id = e->newid[i];
        e->locp[e->newid[i] - 1] = l;
        l->line = &e->linep[li];
        if ((uint32_t)i == b->marker) {
            if (!add_line(e, l, &li, MP_TRUNCATED_FRAME, NULL, NULL, 0))
                return false;
            continue;
        }
        l->mapping_id = e->loc_map[i];
        l->address = b->loc_pc[i] - 1;
        const mp_pcinfo *pi = e->info[i];
        for (size_t k = e->skip[i]; pi != NULL && k < pi->nframes; k++) {
            const mp_frame *f = &pi->frames[k];
            if (f->func == NULL && f->file == NULL)
                continue; /* nothing to say about this frame */
            if (!add_line(e, l, &li, f->func, f->sysname, f->file, f->line))
                return false;
        }
    }
    e->fnp = calloc(NONZERO(e->fns.n), sizeof *e->fnp);
    if (e->fnp == NULL)
        return false;
    for (size_t i = 0; i < e->fns.n; i++)
        e->fnp[i] = &e->fns.v[i];
    return true;
}

/* Values are rounded once, here: the builder sums fractions. */
static int64_t round_value(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    if (v <= -9.2e18)
        return INT64_MIN;
    return (int64_t)llround(v);
}

static void encode_samples(enc *e)
{
    const mp_report_builder *b = e->b;
    for (size_t i = 0; i < b->nsmp; i++) {
        const Perftools__Profiles__Sample init = PERFTOOLS__PROFILES__SAMPLE__INIT;
        const mp_bsample *s = &b->smp[i];
        Perftools__Profiles__Sample *o = &e->smp[i];
        *o = init;
        o->n_location_id = s->depth;
        o->location_id = &e->locids[s->off];
        for (size_t k = 0; k < s->depth; k++)
            e->locids[s->off + k] = e->newid[b->stk[s->off + k]];
        o->n_value = (size_t)(MP_VAL_COUNT - e->first);
        o->value = &e->vals[i * MP_VAL_COUNT];
        for (int k = e->first; k < MP_VAL_COUNT; k++)
            o->value[k - e->first] = round_value(s->v[k]);
        if (s->interval) {
            o->n_label = 1;
            o->label = &e->labelp;
        } else if (s->age >= 0) {
            o->n_label = 1;
            o->label = &e->age_labelp[s->age];
        }
        e->smpp[i] = o;
    }
}

static mp_prof_status pack(enc *e, uint8_t **out, size_t *len)
{
    const mp_report_builder *b = e->b;
    Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
    prof.n_sample_type = (size_t)(MP_VAL_COUNT - e->first);
    prof.sample_type = e->vtp + e->first;
    prof.n_sample = b->nsmp;
    prof.sample = e->smpp;
    prof.n_mapping = e->nmap;
    prof.mapping = e->mapp;
    prof.n_location = e->nused;
    prof.location = e->locp;
    prof.n_function = e->fns.n;
    prof.function = e->fnp;
    prof.n_string_table = e->strs.n;
    prof.string_table = e->strs.v;
    prof.time_nanos = b->opt.time_nanos;
    prof.duration_nanos = b->opt.duration_nanos;
    prof.period_type = &e->period_type;
    prof.period = b->opt.period > INT64_MAX ? INT64_MAX : (int64_t)b->opt.period;
    prof.n_comment = b->ncomments;
    prof.comment = e->comment_idx;
    prof.drop_frames = e->drop.pattern != NULL ? e->drop_idx : 0;

    size_t n = perftools__profiles__profile__get_packed_size(&prof);
    uint8_t *buf = malloc(NONZERO(n));
    if (buf == NULL)
        return MP_PROF_E_NOMEM;
    if (perftools__profiles__profile__pack(&prof, buf) != n) {
        free(buf);
        return MP_PROF_E_INTERNAL;
    }
    *out = buf;
    *len = n;
    return MP_PROF_OK;
}

mp_prof_status mp_report_finish(mp_report_builder *b, uint8_t **out, size_t *len)
{
    if (b == NULL || out == NULL || len == NULL) {
        mp_report_abort(b);
        return MP_PROF_E_INTERNAL;
    }
    /* A peak profile holds in-use values only: its first value is
     * inuse_objects. */
    enc e = {.b = b,
             .maps = &b->c->maps,
             .mode = b->opt.symbolize,
             .first = b->opt.inuse_only ? MP_VAL_INUSE_OBJECTS : 0};
    if (e.mode == MP_PROF_SYMBOLIZE_LINES && !mp_syms_have_lines())
        e.mode = MP_PROF_SYMBOLIZE_FUNCTIONS;
    e.nmap = mp_maps_count(e.maps);
    mp_prof_status st = MP_PROF_E_NOMEM;
    mp_drop_begin(&e.drop);
    if (enc_alloc(&e) && resolve_locations(&e) && prune_locations(&e) && header_strings(&e) &&
        encode_mappings(&e) && encode_locations(&e)) {
        encode_samples(&e);
        st = pack(&e, out, len);
    }
    mp_drop_end(&e.drop);
    if (st == MP_PROF_OK)
        b->c->last_quality = (int)mp_quality_from_counts(e.q_frames, e.q_named, e.q_lined);
    enc_free(&e);
    mp_report_abort(b);
    return st;
}
