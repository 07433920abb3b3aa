/* SPDX-License-Identifier: MIT */
/* The collector's symbolizer (collector.h): the processes of the tree
 * report unsymbolized (addresses, and mappings with paths and GNU
 * build-ids), and the collector names their frames, once per binary for
 * the whole tree, instead of every process building the symbol tables of
 * every object it has loaded (the cost that multiplied by the number of
 * processes).
 *
 * One mp_prof_symbolizer per object (path and build-id), over that
 * object's segments placed at a canonical address (canon_base): the same object loaded at different addresses in different
 * processes (ASLR, exec'd programs) is one set of symbol tables. A
 * report's locations are translated to canonical addresses, named by a
 * small profile built on the object's symbolizer (the profiling
 * library's names: demangled, qualified, its `lines` mode), and the
 * names are written into the report's own functions and lines: its
 * samples, labels (ages) and comments stay as the process wrote them,
 * but for its own drop_frames, applied once it is named (the allocator's
 * entry points leave the leaf end of its stacks, mp_prof_pprof_prune). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling_pprof.h>

#include "collector.h"
#include "profile.pb-c.h"

#define CANON 0x100000000000ull

/* Where a segment that the process mapped at `start` is placed in its
 * object's symbolizer. A position-dependent executable (ET_EXEC, linked
 * below 4 GiB: its symbols are absolute addresses) stays where it is, the
 * same in every process; anything else (PIE, shared objects: loaded at
 * random) goes to its file offset + CANON. */
static uint64_t canon_base(uint64_t start, uint64_t offset)
{
    return start < (1ull << 32) ? start - offset : CANON;
}

typedef Perftools__Profiles__Profile profile;

typedef struct {
    uint64_t start, limit, offset; /* as in the process */
} seg;

typedef struct {
    char *path, *build_id;
    seg *segs; /* the segments its symbolizer was built over */
    size_t nsegs;
    mp_prof_symbolizer *s;
} object;

struct mpt_csyms {
    int mode; /* an mp_prof_symbolize */
    object *v;
    size_t n;
    unsigned built; /* symbolizers built (one per object, more when one grew) */
};

mpt_csyms *mpt_csyms_new(int mode)
{
    mpt_csyms *c = calloc(1, sizeof *c);
    if (c != NULL)
        c->mode = mode;
    return c;
}

static void object_clear(object *o)
{
    mp_prof_symbolizer_free(o->s);
    free(o->path);
    free(o->build_id);
    free(o->segs);
    memset(o, 0, sizeof *o);
}

void mpt_csyms_free(mpt_csyms *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        object_clear(&c->v[i]);
    free(c->v);
    free(c);
}

unsigned mpt_csyms_built(const mpt_csyms *c) { return c->built; }

static const char *str(const profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

static bool has_seg(const object *o, const Perftools__Profiles__Mapping *m)
{
    for (size_t i = 0; i < o->nsegs; i++)
        if (o->segs[i].offset == m->file_offset &&
            o->segs[i].limit - o->segs[i].start == m->memory_limit - m->memory_start)
            return true;
    return false;
}

/* (Re)builds o's symbolizer over its segments. */
static bool build(mpt_csyms *c, object *o)
{
    mp_prof_symbolizer_free(o->s);
    o->s = NULL;
    if (mp_prof_symbolizer_new(&o->s) != MP_PROF_OK)
        return false;
    for (size_t i = 0; i < o->nsegs; i++) {
        uint64_t base = canon_base(o->segs[i].start, o->segs[i].offset);
        mp_prof_mapping m = {
            .start = base + o->segs[i].offset,
            .limit = base + o->segs[i].offset + (o->segs[i].limit - o->segs[i].start),
            /* the bias the symbolizer takes is start - file_offset:
                                0 for a position-dependent executable (absolute
                                symbols), CANON for anything else */
            .file_offset = o->segs[i].start < (1ull << 32) ? o->segs[i].start : o->segs[i].offset,
            .path = o->path,
            .build_id = o->build_id};
        if (mp_prof_symbolizer_add_mapping(o->s, &m) != MP_PROF_OK) {
            mp_prof_symbolizer_free(o->s);
            o->s = NULL;
            return false;
        }
    }
    c->built++;
    return true;
}

/* The object of mapping m, with a symbolizer that covers m; NULL when it
 * cannot have one (no absolute path: [vdso], anonymous code). */
static object *object_of(mpt_csyms *c, const profile *p, const Perftools__Profiles__Mapping *m)
{
    const char *path = str(p, m->filename), *bid = str(p, m->build_id);
    if (path[0] != '/')
        return NULL;
    object *o = NULL;
    for (size_t i = 0; i < c->n && o == NULL; i++)
        if (strcmp(c->v[i].path, path) == 0 && strcmp(c->v[i].build_id, bid) == 0)
            o = &c->v[i];
    if (o == NULL) {
        object *v = realloc(c->v, (c->n + 1) * sizeof *v);
        if (v == NULL)
            return NULL;
        c->v = v;
        o = &c->v[c->n++];
        memset(o, 0, sizeof *o);
        o->path = strdup(path);
        o->build_id = strdup(bid);
        if (o->path == NULL || o->build_id == NULL) {
            object_clear(o);
            c->n--;
            return NULL;
        }
    }
    if (o->s != NULL && has_seg(o, m))
        return o;
    seg *segs = realloc(o->segs, (o->nsegs + 1) * sizeof *segs);
    if (segs == NULL)
        return NULL;
    o->segs = segs;
    o->segs[o->nsegs++] = (seg){m->memory_start, m->memory_limit, m->file_offset};
    if (!build(c, o)) {
        o->nsegs--; /* overlapping segments: this one stays unnamed */
        if (o->nsegs > 0)
            (void)build(c, o);
        return NULL;
    }
    return o;
}

/* Appends string `s` to p's table; its index, or -1. */
static int64_t add_string(profile *p, const char *s)
{
    char *copy = strdup(s);
    char **t = copy != NULL ? realloc(p->string_table, (p->n_string_table + 1) * sizeof *t) : NULL;
    if (t == NULL) {
        free(copy);
        return -1;
    }
    p->string_table = t;
    t[p->n_string_table] = copy;
    return (int64_t)p->n_string_table++;
}

/* Appends a function to p (name, system name, file from q's strings); its id or 0. */
static uint64_t add_function(profile *p, uint64_t *next_id, const profile *q,
                             const Perftools__Profiles__Function *f)
{
    Perftools__Profiles__Function *nf = malloc(sizeof *nf);
    Perftools__Profiles__Function **v =
        nf != NULL ? realloc(p->function, (p->n_function + 1) * sizeof *v) : NULL;
    if (v == NULL) {
        free(nf);
        return 0;
    }
    p->function = v;
    perftools__profiles__function__init(nf);
    nf->id = ++*next_id;
    nf->name = add_string(p, str(q, f->name));
    nf->system_name = add_string(p, str(q, f->system_name));
    nf->filename = add_string(p, str(q, f->filename));
    nf->start_line = f->start_line;
    if (nf->name < 0 || nf->system_name < 0 || nf->filename < 0) {
        free(nf);
        return 0;
    }
    v[p->n_function++] = nf;
    return nf->id;
}

/* Names p's locations in mapping m through object o. */
static void name_mapping(mpt_csyms *c, profile *p, Perftools__Profiles__Mapping *m, object *o,
                         uint64_t *next_fn)
{
    mp_prof_pprof_options opt;
    mp_prof_pprof_options_init(&opt);
    opt.symbolize = (mp_prof_symbolize)c->mode;
    mp_prof_pprof *b;
    if (mp_prof_pprof_begin(o->s, &opt, &b) != MP_PROF_OK)
        return;
    size_t n = 0;
    for (size_t i = 0; i < p->n_location; i++) {
        Perftools__Profiles__Location *l = p->location[i];
        if (l->mapping_id != m->id || l->n_line > 0)
            continue;
        /* a return address again: the builder moves it back by one */
        uintptr_t pc = (uintptr_t)(l->address - m->memory_start + m->file_offset +
                                   canon_base(m->memory_start, m->file_offset) + 1);
        double one[2] = {1, 1};
        if (mp_prof_pprof_add(b, &pc, 1, one, 2) != MP_PROF_OK) {
            mp_prof_pprof_abort(b);
            return;
        }
        n++;
    }
    uint8_t *buf;
    size_t len;
    if (n == 0) {
        mp_prof_pprof_abort(b);
        return;
    }
    if (mp_prof_pprof_finish(b, &buf, &len) != MP_PROF_OK)
        return;
    profile *q = perftools__profiles__profile__unpack(NULL, len, buf);
    mp_prof_buffer_free(buf);
    if (q == NULL)
        return;
    /* q's functions, each added to p once: ids[j] for q->function[j] */
    uint64_t *ids = calloc(q->n_function ? q->n_function : 1, sizeof *ids);
    bool named = false;
    for (size_t i = 0; i < p->n_location && ids != NULL; i++) {
        Perftools__Profiles__Location *l = p->location[i];
        if (l->mapping_id != m->id || l->n_line > 0)
            continue;
        uint64_t canon = l->address - m->memory_start + m->file_offset +
                         canon_base(m->memory_start, m->file_offset);
        const Perftools__Profiles__Location *ql = NULL;
        for (size_t j = 0; j < q->n_location && ql == NULL; j++)
            if (q->location[j]->address == canon)
                ql = q->location[j];
        if (ql == NULL || ql->n_line == 0)
            continue;
        Perftools__Profiles__Line **lines = calloc(ql->n_line, sizeof *lines);
        if (lines == NULL)
            break;
        size_t k = 0;
        for (size_t j = 0; j < ql->n_line; j++) {
            uint64_t id = 0;
            for (size_t f = 0; f < q->n_function && id == 0; f++)
                if (q->function[f]->id == ql->line[j]->function_id)
                    id = ids[f] != 0 ? ids[f]
                                     : (ids[f] = add_function(p, next_fn, q, q->function[f]));
            Perftools__Profiles__Line *nl = id != 0 ? malloc(sizeof *nl) : NULL;
            if (nl == NULL)
                continue;
            perftools__profiles__line__init(nl);
            nl->function_id = id;
            nl->line = ql->line[j]->line;
            lines[k++] = nl;
        }
        l->line = lines;
        l->n_line = k;
        named = named || k > 0;
    }
    free(ids);
    if (named) {
        m->has_functions = 1;
        for (size_t j = 0; j < q->n_mapping; j++)
            if (q->mapping[j]->has_line_numbers)
                m->has_line_numbers = 1, m->has_filenames = 1;
    }
    perftools__profiles__profile__free_unpacked(q, NULL);
}

int mpt_csyms_apply(mpt_csyms *c, const uint8_t *in, size_t len, uint8_t **out, size_t *outlen)
{
    *out = NULL;
    profile *p = perftools__profiles__profile__unpack(NULL, len, in);
    if (p == NULL)
        return -1;
    /* Functions are numbered after the report's own (none when it was
     * written unsymbolized). One table entry per named frame: the report
     * stays small enough, and pprof readers fold equal names. */
    uint64_t next_fn = 0;
    for (size_t i = 0; i < p->n_function; i++)
        next_fn = p->function[i]->id > next_fn ? p->function[i]->id : next_fn;
    for (size_t i = 0; i < p->n_mapping; i++) {
        Perftools__Profiles__Mapping *m = p->mapping[i];
        if (m->has_functions)
            continue;
        bool used = false;
        for (size_t j = 0; j < p->n_location && !used; j++)
            used = p->location[j]->mapping_id == m->id && p->location[j]->n_line == 0;
        object *o = used ? object_of(c, p, m) : NULL;
        if (o != NULL)
            name_mapping(c, p, m, o, &next_fn);
    }
    size_t n = perftools__profiles__profile__get_packed_size(p);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf != NULL)
        perftools__profiles__profile__pack(p, buf);
    perftools__profiles__profile__free_unpacked(p, NULL);
    if (buf == NULL)
        return -1;
    /* Named now: the report's drop_frames (the allocator's entry points,
     * as the process was told) applies to its stacks. */
    uint8_t *pruned;
    size_t plen;
    if (mp_prof_pprof_prune(buf, n, &pruned, &plen) == MP_PROF_OK) {
        free(buf);
        /* mp_prof_buffer_free() is free(): this process samples nothing */
        buf = pruned;
        n = plen;
    }
    *out = buf;
    *outlen = n;
    return 0;
}
