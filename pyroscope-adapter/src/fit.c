/* SPDX-License-Identifier: MIT */
/* Shaping a pprof for Pyroscope: no `__delta__` or `age` sample label, samples
 * merged by stack, parts within the server's limits (see fit.h). */
#define _GNU_SOURCE
#include "fit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "profile.pb-c.h"
#include "u64map.h"
#include "util.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Function Function;
typedef Perftools__Profiles__Mapping Mapping;

/* Bytes a length-delimited field of `n` bytes takes in its parent (every
 * repeated message of Profile has a field number below 16: one tag byte). */
static size_t field_bytes(size_t n)
{
    size_t v = 1;
    for (size_t x = n; x >= 0x80; x >>= 7)
        v++;
    return 1 + v + n;
}

/* An id -> index map of one of the profile's tables. */
typedef struct table {
    mp_pyro_u64map ids;
    size_t n;
    size_t *bytes;   /* field_bytes of each element */
    size_t *stamp;   /* last probe that counted the element */
    size_t *in_part; /* part number + 1 that holds it, 0 = none yet */
} table;

static int table_init(table *t, size_t n, uint64_t (*id_of)(const void *, size_t),
                      size_t (*size_of)(const void *, size_t), const void *elems)
{
    t->n = n;
    t->bytes = calloc(n ? n : 1, sizeof *t->bytes);
    t->stamp = calloc(n ? n : 1, sizeof *t->stamp);
    t->in_part = calloc(n ? n : 1, sizeof *t->in_part);
    if (!t->bytes || !t->stamp || !t->in_part)
        return -1;
    for (size_t i = 0; i < n; i++) {
        bool found;
        size_t *slot = mp_pyro_u64map_slot(&t->ids, id_of(elems, i), &found);
        if (!slot)
            return -1;
        if (!found) {
            *slot = i + 1;
            t->ids.len++;
        }
        t->bytes[i] = field_bytes(size_of(elems, i));
    }
    return 0;
}

static void table_free(table *t)
{
    mp_pyro_u64map_free(&t->ids);
    free(t->bytes);
    free(t->stamp);
    free(t->in_part);
}

/* Index of `id`, or SIZE_MAX when the profile has no such element. */
static size_t table_find(table *t, uint64_t id)
{
    bool found;
    size_t *slot = mp_pyro_u64map_slot(&t->ids, id, &found);
    return slot && found ? *slot - 1 : SIZE_MAX;
}

#define ACCESSORS(T, lower)                                                                        \
    static uint64_t lower##_id(const void *e, size_t i) { return ((T *const *)e)[i]->id; }         \
    static size_t lower##_size(const void *e, size_t i)                                            \
    {                                                                                              \
        return perftools__profiles__##lower##__get_packed_size(((T *const *)e)[i]);                \
    }
ACCESSORS(Location, location)
ACCESSORS(Function, function)
ACCESSORS(Mapping, mapping)
#undef ACCESSORS

typedef struct fitter {
    Profile *p;
    table locs, funcs, maps;
    size_t probe;
} fitter;

/* Bytes of element `i` of `t` when the part numbered `part` lacks it and
 * this probe has not counted it yet (else 0); with `commit`, records it
 * as in the part. */
static size_t bring(const fitter *f, table *t, size_t i, size_t part, bool commit)
{
    if (i == SIZE_MAX || t->in_part[i] == part + 1 || t->stamp[i] == f->probe)
        return 0;
    t->stamp[i] = f->probe;
    if (commit)
        t->in_part[i] = part + 1;
    return t->bytes[i];
}

/* Bytes that `s` adds to the part numbered `part` (locations, functions
 * and mappings it brings in included); with `commit`, records them as in
 * the part. Each element is counted once per probe. */
static size_t sample_cost(fitter *f, const Sample *s, size_t part, bool commit)
{
    size_t cost = field_bytes(perftools__profiles__sample__get_packed_size(s));
    f->probe++;
    for (size_t k = 0; k < s->n_location_id; k++) {
        size_t li = table_find(&f->locs, s->location_id[k]);
        size_t c = bring(f, &f->locs, li, part, commit);
        if (c == 0) /* its mapping and functions came with it */
            continue;
        cost += c;
        const Location *l = f->p->location[li];
        if (l->mapping_id)
            cost += bring(f, &f->maps, table_find(&f->maps, l->mapping_id), part, commit);
        for (size_t j = 0; j < l->n_line; j++)
            cost +=
                bring(f, &f->funcs, table_find(&f->funcs, l->line[j]->function_id), part, commit);
    }
    return cost;
}

/* --- removing __delta__ and age, merging samples by stack ------------------ */

static bool same_key(const Sample *a, const Sample *b)
{
    if (a->n_location_id != b->n_location_id || a->n_label != b->n_label ||
        a->n_value != b->n_value)
        return false;
    if (a->n_location_id &&
        memcmp(a->location_id, b->location_id, a->n_location_id * sizeof *a->location_id) != 0)
        return false;
    for (size_t i = 0; i < a->n_label; i++) {
        const Perftools__Profiles__Label *x = a->label[i], *y = b->label[i];
        if (x->key != y->key || x->str != y->str || x->num != y->num || x->num_unit != y->num_unit)
            return false;
    }
    return true;
}

static uint64_t key_hash(const Sample *s)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ s->n_location_id;
    for (size_t i = 0; i < s->n_location_id; i++)
        h = mp_pyro_u64_mix(h ^ s->location_id[i]) + i;
    for (size_t i = 0; i < s->n_label; i++)
        h = mp_pyro_u64_mix(h ^ (uint64_t)s->label[i]->key ^ ((uint64_t)s->label[i]->str << 20) ^
                            ((uint64_t)s->label[i]->num << 40));
    return h;
}

/* The sample labels that never go up (fit.h says why): mimprof's
 * `__delta__`, and its `age` (the age bucket of in-use samples). */
static bool stripped_key(const char *key)
{
    return strcmp(key, "__delta__") == 0 || strcmp(key, "age") == 0;
}

/* Removes the stripped labels of every sample (freeing them). */
static void strip_labels(Profile *p)
{
    for (size_t si = 0; si < p->n_string_table; si++) {
        if (!stripped_key(p->string_table[si]))
            continue;
        for (size_t i = 0; i < p->n_sample; i++) {
            Sample *s = p->sample[i];
            size_t k = 0;
            for (size_t j = 0; j < s->n_label; j++) {
                if (s->label[j]->key == (int64_t)si)
                    perftools__profiles__label__free_unpacked(s->label[j], NULL);
                else
                    s->label[k++] = s->label[j];
            }
            s->n_label = k;
        }
    }
}

/* The samples left after merging, in first-seen order, in `keep`. Merged
 * samples stay in p->sample (freed with it); their values are added to
 * the first one with the same key. -1 on OOM. */
static int merge_samples(Profile *p, Sample **keep, size_t *nkeep)
{
    mp_pyro_u64map m = {0};
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < p->n_sample && rc == 0; i++) {
        Sample *s = p->sample[i];
        for (uint64_t h = key_hash(s);; h++) { /* re-probe on a hash collision */
            bool found;
            size_t *slot = mp_pyro_u64map_slot(&m, h, &found);
            if (!slot) {
                rc = -1;
                break;
            }
            if (!found) {
                *slot = n + 1;
                m.len++;
                keep[n++] = s;
                break;
            }
            Sample *t = keep[*slot - 1];
            if (same_key(s, t)) {
                for (size_t v = 0; v < s->n_value; v++) /* wraps as the server's would */
                    t->value[v] = (int64_t)((uint64_t)t->value[v] + (uint64_t)s->value[v]);
                break;
            }
        }
    }
    mp_pyro_u64map_free(&m);
    *nkeep = n;
    return rc;
}

/* Whether any message of `p` holds fields profile.proto does not define:
 * they would be copied into every part as they came (a field number 0
 * even re-encoded into bytes no decoder reads), so such input is
 * refused. No producer of this workspace writes them. */
static bool has_unknown(const Profile *p)
{
#define UNK(m) ((m) && (m)->base.n_unknown_fields)
    bool u = UNK(p) || UNK(p->period_type);
    for (size_t i = 0; i < p->n_sample_type && !u; i++)
        u = UNK(p->sample_type[i]);
    for (size_t i = 0; i < p->n_sample && !u; i++) {
        u = UNK(p->sample[i]);
        for (size_t j = 0; j < p->sample[i]->n_label && !u; j++)
            u = UNK(p->sample[i]->label[j]);
    }
    for (size_t i = 0; i < p->n_location && !u; i++) {
        u = UNK(p->location[i]);
        for (size_t j = 0; j < p->location[i]->n_line && !u; j++)
            u = UNK(p->location[i]->line[j]);
    }
    for (size_t i = 0; i < p->n_function && !u; i++)
        u = UNK(p->function[i]);
    for (size_t i = 0; i < p->n_mapping && !u; i++)
        u = UNK(p->mapping[i]);
#undef UNK
    return u;
}

/* --- parts ------------------------------------------------------------------ */

/* Encodes part `part`: its samples (part_of[i] == part) and the tables'
 * elements they reference. */
static int emit(fitter *f, Sample **keep, size_t nkeep, const size_t *part_of, size_t part,
                int64_t time_nanos, mp_pyro_part *out)
{
    Profile q = *f->p;
    q.time_nanos = time_nanos;
    Sample **ss = malloc((nkeep ? nkeep : 1) * sizeof *ss);
    Location **ls = malloc((f->locs.n ? f->locs.n : 1) * sizeof *ls);
    Function **fs = malloc((f->funcs.n ? f->funcs.n : 1) * sizeof *fs);
    Mapping **ms = malloc((f->maps.n ? f->maps.n : 1) * sizeof *ms);
    int rc = -1;
    if (!ss || !ls || !fs || !ms)
        goto out;
    q.n_sample = q.n_location = q.n_function = q.n_mapping = 0;
    f->probe++;
    for (size_t i = 0; i < nkeep; i++) {
        if (part_of[i] != part)
            continue;
        const Sample *s = keep[i];
        ss[q.n_sample++] = keep[i];
        for (size_t k = 0; k < s->n_location_id; k++) {
            size_t li = table_find(&f->locs, s->location_id[k]);
            if (li == SIZE_MAX || f->locs.stamp[li] == f->probe)
                continue;
            f->locs.stamp[li] = f->probe;
            const Location *l = f->p->location[li];
            ls[q.n_location++] = f->p->location[li];
            size_t mi = l->mapping_id ? table_find(&f->maps, l->mapping_id) : SIZE_MAX;
            if (mi != SIZE_MAX && f->maps.stamp[mi] != f->probe) {
                f->maps.stamp[mi] = f->probe;
                ms[q.n_mapping++] = f->p->mapping[mi];
            }
            for (size_t j = 0; j < l->n_line; j++) {
                size_t fi = table_find(&f->funcs, l->line[j]->function_id);
                if (fi != SIZE_MAX && f->funcs.stamp[fi] != f->probe) {
                    f->funcs.stamp[fi] = f->probe;
                    fs[q.n_function++] = f->p->function[fi];
                }
            }
        }
    }
    q.sample = ss;
    q.location = ls;
    q.function = fs;
    q.mapping = ms;
    size_t n = perftools__profiles__profile__get_packed_size(&q);
    out->pprof = malloc(n ? n : 1);
    if (!out->pprof)
        goto out;
    out->len = perftools__profiles__profile__pack(&q, out->pprof);
    out->samples = q.n_sample;
    rc = 0;
out:
    free(ss);
    free(ls);
    free(fs);
    free(ms);
    return rc;
}

/* The instant a peak profile describes: its "peak: time_nanos=N" comment
 * (profiling/src/peak_comments.c, documented in cli/README.md); 0 when
 * it has none. */
static int64_t peak_time(const Profile *p)
{
    static const char key[] = "peak: time_nanos=";
    for (size_t i = 0; i < p->n_comment; i++) {
        int64_t si = p->comment[i];
        if (si < 0 || (size_t)si >= p->n_string_table)
            continue;
        const char *c = p->string_table[si];
        if (strncmp(c, key, sizeof key - 1) != 0)
            continue;
        char *end;
        long long v = strtoll(c + sizeof key - 1, &end, 10);
        if (end != c + sizeof key - 1 && v > 0)
            return (int64_t)v;
    }
    return 0;
}

void mp_pyro_parts_free(mp_pyro_parts *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].pprof);
    free(p->v);
    p->v = NULL;
    p->n = 0;
}

mp_pyro_status mp_pyro_fit(const uint8_t *in, size_t len, size_t max_samples, size_t max_bytes,
                           const mp_pyro_fit_stamp *stamp, mp_pyro_parts *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof *out);
    Profile *p = perftools__profiles__profile__unpack(NULL, len, in);
    if (!p) {
        mp_pyro_fmt(err, errlen, "the profile is not a pprof Profile message");
        return MP_PYRO_E_INVALID_ARGUMENT;
    }
    if (has_unknown(p)) {
        perftools__profiles__profile__free_unpacked(p, NULL);
        mp_pyro_fmt(err, errlen, "the profile holds fields that pprof does not define");
        return MP_PYRO_E_INVALID_ARGUMENT;
    }
    mp_pyro_status st = MP_PYRO_E_NOMEM;
    fitter f = {.p = p};
    Sample **keep = malloc((p->n_sample ? p->n_sample : 1) * sizeof *keep);
    size_t *part_of = malloc((p->n_sample ? p->n_sample : 1) * sizeof *part_of);
    size_t nkeep = 0, nparts = 0;
    if (!keep || !part_of)
        goto out;
    strip_labels(p);
    if (merge_samples(p, keep, &nkeep) != 0 ||
        table_init(&f.locs, p->n_location, location_id, location_size, p->location) != 0 ||
        table_init(&f.funcs, p->n_function, function_id, function_size, p->function) != 0 ||
        table_init(&f.maps, p->n_mapping, mapping_id, mapping_size, p->mapping) != 0)
        goto out;

    Profile base = *p;
    base.n_sample = base.n_location = base.n_function = base.n_mapping = 0;
    const size_t base_bytes = perftools__profiles__profile__get_packed_size(&base);
    size_t part = 0, bytes = base_bytes, samples = 0;
    for (size_t i = 0; i < nkeep; i++) {
        size_t cost = sample_cost(&f, keep[i], part, false);
        bool full =
            (max_samples && samples + 1 > max_samples) || (max_bytes && bytes + cost > max_bytes);
        if (full && samples > 0) {
            part++;
            bytes = base_bytes;
            samples = 0;
            cost = sample_cost(&f, keep[i], part, false);
        }
        if (max_bytes && bytes + cost > max_bytes) {
            mp_pyro_fmt(err, errlen,
                        "one stack of the profile needs %zu bytes with the profile's tables "
                        "(%zu bytes); the limit per request is %zu",
                        cost, base_bytes, max_bytes);
            st = MP_PYRO_E_INVALID_ARGUMENT;
            goto out;
        }
        sample_cost(&f, keep[i], part, true);
        bytes += cost;
        samples++;
        part_of[i] = part;
    }
    nparts = nkeep ? part + 1 : 1;
    out->v = calloc(nparts, sizeof *out->v);
    if (!out->v)
        goto out;
    const int64_t peak_ns = stamp ? peak_time(p) : 0;
    for (size_t k = 0; k < nparts; k++, out->n++) {
        int64_t t = stamp ? stamp->stamp(stamp->ctx, k, peak_ns) : p->time_nanos;
        if (emit(&f, keep, nkeep, part_of, k, t, &out->v[k]) != 0)
            goto out;
    }
    st = MP_PYRO_OK;
out:
    if (st != MP_PYRO_OK)
        mp_pyro_parts_free(out);
    table_free(&f.locs);
    table_free(&f.funcs);
    table_free(&f.maps);
    free(keep);
    free(part_of);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return st;
}
