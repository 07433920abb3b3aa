/* SPDX-License-Identifier: MIT */
/* Several processes' pprof reports of one window as one profile
 * (collector_pyro.c): every input's tables appended with their ids and
 * string indices moved past the previous inputs', every sample kept (the
 * adapter folds equal stacks before uploading: mp_pyro_agent_submit).
 * The sample types are the first input's; an input with other types is
 * refused. The profile's time is the window's (servers take it as the
 * profile's timestamp), else the inputs' span. In-use values of an input whose `inuse` flag is false are
 * zeroed: a later report of the same process in the window holds its
 * in-use set (a gauge, which must not count one process twice). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "collector.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile profile;

/* Moves input p's ids by the offsets and its string indices by `s`. */
static void shift(profile *p, uint64_t fn, uint64_t loc, uint64_t map, int64_t s)
{
    for (size_t i = 0; i < p->n_function; i++) {
        Perftools__Profiles__Function *f = p->function[i];
        f->id += fn;
        f->name += s;
        f->system_name += s;
        f->filename += s;
    }
    for (size_t i = 0; i < p->n_mapping; i++) {
        p->mapping[i]->id += map;
        p->mapping[i]->filename += s;
        p->mapping[i]->build_id += s;
    }
    for (size_t i = 0; i < p->n_location; i++) {
        Perftools__Profiles__Location *l = p->location[i];
        l->id += loc;
        if (l->mapping_id != 0)
            l->mapping_id += map;
        for (size_t j = 0; j < l->n_line; j++)
            l->line[j]->function_id += fn;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        Perftools__Profiles__Sample *x = p->sample[i];
        for (size_t j = 0; j < x->n_location_id; j++)
            x->location_id[j] += loc;
        for (size_t j = 0; j < x->n_label; j++) {
            x->label[j]->key += s;
            if (x->label[j]->str != 0)
                x->label[j]->str += s;
            if (x->label[j]->num_unit != 0)
                x->label[j]->num_unit += s;
        }
    }
}

static uint64_t max_id_fn(const profile *p)
{
    uint64_t m = 0;
    for (size_t i = 0; i < p->n_function; i++)
        m = p->function[i]->id > m ? p->function[i]->id : m;
    return m;
}

static uint64_t max_id_loc(const profile *p)
{
    uint64_t m = 0;
    for (size_t i = 0; i < p->n_location; i++)
        m = p->location[i]->id > m ? p->location[i]->id : m;
    return m;
}

static uint64_t max_id_map(const profile *p)
{
    uint64_t m = 0;
    for (size_t i = 0; i < p->n_mapping; i++)
        m = p->mapping[i]->id > m ? p->mapping[i]->id : m;
    return m;
}

/* The names of p's sample types, as one comparable string. */
static bool same_types(const profile *a, const profile *b)
{
    if (a->n_sample_type != b->n_sample_type)
        return false;
    for (size_t i = 0; i < a->n_sample_type; i++) {
        int64_t ta = a->sample_type[i]->type, tb = b->sample_type[i]->type;
        if (ta < 0 || tb < 0 || (size_t)ta >= a->n_string_table ||
            (size_t)tb >= b->n_string_table ||
            strcmp(a->string_table[ta], b->string_table[tb]) != 0)
            return false;
    }
    return true;
}

/* Zeroes p's inuse_* values. */
static void drop_inuse(profile *p)
{
    for (size_t t = 0; t < p->n_sample_type; t++) {
        int64_t k = p->sample_type[t]->type;
        if (k < 0 || (size_t)k >= p->n_string_table ||
            strncmp(p->string_table[k], "inuse_", 6) != 0)
            continue;
        for (size_t i = 0; i < p->n_sample; i++)
            if (t < p->sample[i]->n_value)
                p->sample[i]->value[t] = 0;
    }
}

/* Frees the fields of m that its schema does not name. protobuf-c keeps
 * them and packs them again, but not always as they came: a merge of
 * such an input packed bytes that no decoder reads back (fuzzer). */
static void strip_unknown(ProtobufCMessage *m)
{
    if (m == NULL)
        return;
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        free(m->unknown_fields[i].data);
    free(m->unknown_fields);
    m->unknown_fields = NULL;
    m->n_unknown_fields = 0;
}

/* strip_unknown over p and every message it holds. */
static void strip_profile(profile *p)
{
    strip_unknown(&p->base);
    strip_unknown((ProtobufCMessage *)p->period_type);
    for (size_t i = 0; i < p->n_sample_type; i++)
        strip_unknown(&p->sample_type[i]->base);
    for (size_t i = 0; i < p->n_sample; i++) {
        strip_unknown(&p->sample[i]->base);
        for (size_t j = 0; j < p->sample[i]->n_label; j++)
            strip_unknown(&p->sample[i]->label[j]->base);
    }
    for (size_t i = 0; i < p->n_mapping; i++)
        strip_unknown(&p->mapping[i]->base);
    for (size_t i = 0; i < p->n_location; i++) {
        strip_unknown(&p->location[i]->base);
        for (size_t j = 0; j < p->location[i]->n_line; j++)
            strip_unknown(&p->location[i]->line[j]->base);
    }
    for (size_t i = 0; i < p->n_function; i++)
        strip_unknown(&p->function[i]->base);
}

/* Appends n pointers of `from` to *to (grown). */
static bool append(void ***to, size_t *nto, void *const *from, size_t n)
{
    if (n == 0)
        return true;
    void **v = realloc(*to, (*nto + n) * sizeof *v);
    if (v == NULL)
        return false;
    memcpy(v + *nto, from, n * sizeof *v);
    *to = v;
    *nto += n;
    return true;
}

int mpt_pprof_merge(const mpt_merge_in *in, size_t n, int64_t time_ns, int64_t duration_ns,
                    uint8_t **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    profile **ps = calloc(n ? n : 1, sizeof *ps);
    if (ps == NULL)
        return -1;
    int rc = -1;
    profile m = PERFTOOLS__PROFILES__PROFILE__INIT;
    for (size_t i = 0; i < n; i++) {
        ps[i] = perftools__profiles__profile__unpack(NULL, in[i].len, in[i].buf);
        if (ps[i] == NULL || ps[i]->n_string_table == 0 || (i > 0 && !same_types(ps[0], ps[i])))
            goto out;
        strip_profile(ps[i]);
    }
    if (n == 0)
        goto out;
    uint64_t fn = 0, loc = 0, map = 0;
    int64_t s = 0;
    int64_t t0 = 0, t1 = 0;
    for (size_t i = 0; i < n; i++) {
        profile *p = ps[i];
        if (!in[i].inuse)
            drop_inuse(p);
        uint64_t nfn = max_id_fn(p), nloc = max_id_loc(p), nmap = max_id_map(p);
        shift(p, fn, loc, map, s);
        fn += nfn;
        loc += nloc;
        map += nmap;
        s += (int64_t)p->n_string_table;
        if (!append((void ***)&m.string_table, &m.n_string_table, (void *const *)p->string_table,
                    p->n_string_table) ||
            !append((void ***)&m.function, &m.n_function, (void *const *)p->function,
                    p->n_function) ||
            !append((void ***)&m.mapping, &m.n_mapping, (void *const *)p->mapping, p->n_mapping) ||
            !append((void ***)&m.location, &m.n_location, (void *const *)p->location,
                    p->n_location) ||
            !append((void ***)&m.sample, &m.n_sample, (void *const *)p->sample, p->n_sample))
            goto out;
        if (p->time_nanos != 0 && (t0 == 0 || p->time_nanos < t0))
            t0 = p->time_nanos;
        if (p->time_nanos + p->duration_nanos > t1)
            t1 = p->time_nanos + p->duration_nanos;
    }
    /* The first input's header: its types (string indices unshifted: the
     * first input's strings come first). */
    m.sample_type = ps[0]->sample_type;
    m.n_sample_type = ps[0]->n_sample_type;
    m.period_type = ps[0]->period_type;
    m.period = ps[0]->period;
    m.default_sample_type = ps[0]->default_sample_type;
    m.time_nanos = time_ns != 0 ? time_ns : t0;
    m.duration_nanos = time_ns != 0 ? duration_ns : t1 > t0 ? t1 - t0 : 0;
    size_t len = perftools__profiles__profile__get_packed_size(&m);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        goto out;
    perftools__profiles__profile__pack(&m, buf);
    *out = buf;
    *outlen = len;
    rc = 0;
out:
    free(m.string_table);
    free(m.function);
    free(m.mapping);
    free(m.location);
    free(m.sample);
    for (size_t i = 0; i < n; i++)
        if (ps[i] != NULL)
            perftools__profiles__profile__free_unpacked(ps[i], NULL);
    free(ps);
    return rc;
}
