/* SPDX-License-Identifier: MIT */
/* The tests' protobuf field reader and pprof decoder (see pprof_decode.h).
 *
 * Protobuf wire format: each field is a varint key (field << 3 | wire
 * type); wire type 0 = varint, 1 = 64-bit, 2 = length-delimited (strings,
 * messages, packed repeated scalars), 5 = 32-bit. Repeated scalar fields
 * may arrive packed (type 2) or one per key (type 0); both are accepted. */
#include "pprof_decode.h"

#include <stdlib.h>
#include <string.h>

static bool varint(pbr *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return false;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

bool pb_next(pbr *r, pbf *f)
{
    if (r->bad || r->p >= r->end)
        return false;
    uint64_t key;
    if (!varint(r, &key))
        goto bad;
    f->field = (uint32_t)(key >> 3);
    f->wt = (uint32_t)(key & 7);
    f->data = NULL;
    f->len = 0;
    f->v = 0;
    switch (f->wt) {
    case 0:
        if (!varint(r, &f->v))
            goto bad;
        return true;
    case 1:
        if (r->end - r->p < 8)
            goto bad;
        memcpy(&f->v, r->p, 8);
        r->p += 8;
        return true;
    case 2: {
        uint64_t n;
        if (!varint(r, &n) || n > (uint64_t)(r->end - r->p))
            goto bad;
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return true;
    }
    case 5:
        if (r->end - r->p < 4)
            goto bad;
        r->p += 4;
        return true;
    default:
        goto bad;
    }
bad:
    r->bad = true;
    return false;
}

/* One more zeroed element at index *n, the array doubling at powers of two
 * (decoding 100,000 samples stays linear, also under MALLOC_PERTURB_). */
static bool push(void **arr, size_t *n, size_t elem)
{
    if ((*n & (*n - 1)) == 0) {
        void *a = realloc(*arr, (*n ? 2 * *n : 1) * elem);
        if (a == NULL)
            return false;
        *arr = a;
    }
    memset((char *)*arr + *n * elem, 0, elem);
    (*n)++;
    return true;
}

/* A repeated varint field, packed or not. */
static bool repeated_varint(const pbf *f, uint64_t **arr, size_t *n)
{
    if (f->wt == 0) {
        if (!push((void **)arr, n, sizeof **arr))
            return false;
        (*arr)[*n - 1] = f->v;
        return true;
    }
    if (f->wt != 2)
        return false;
    pbr s = pb_sub(f);
    while (s.p < s.end) {
        uint64_t v;
        if (!varint(&s, &v) || !push((void **)arr, n, sizeof **arr))
            return false;
        (*arr)[*n - 1] = v;
    }
    return true;
}

/* The varint fields 1..n of a message into v[0..n-1]; others skipped. */
static bool varints(pbr s, uint64_t *v, size_t n)
{
    pbf g;
    while (pb_next(&s, &g))
        if (g.wt == 0 && g.field >= 1 && g.field <= n)
            v[g.field - 1] = g.v;
    return !s.bad;
}

static bool value_type(pbr s, tp_value_type *vt)
{
    uint64_t v[2] = {0};
    if (!varints(s, v, 2))
        return false;
    *vt = (tp_value_type){(int64_t)v[0], (int64_t)v[1]};
    return true;
}

static bool label(pbr s, tp_label *l)
{
    uint64_t v[4] = {0};
    if (!varints(s, v, 4))
        return false;
    *l = (tp_label){(int64_t)v[0], (int64_t)v[1], (int64_t)v[2], (int64_t)v[3]};
    return true;
}

static bool sample(pbr s, tp_sample *o)
{
    pbf g;
    while (pb_next(&s, &g)) {
        if (g.field == 1) {
            if (!repeated_varint(&g, &o->location_ids, &o->nlocations))
                return false;
        } else if (g.field == 2) {
            if (!repeated_varint(&g, (uint64_t **)&o->values, &o->nvalues))
                return false;
        } else if (g.field == 3 && g.wt == 2) {
            if (!push((void **)&o->labels, &o->nlabels, sizeof *o->labels) ||
                !label(pb_sub(&g), &o->labels[o->nlabels - 1]))
                return false;
        }
    }
    return !s.bad;
}

static bool location(pbr s, tp_location *o)
{
    pbf g;
    while (pb_next(&s, &g)) {
        if (g.field == 1 && g.wt == 0) {
            o->id = g.v;
        } else if (g.field == 2 && g.wt == 0) {
            o->mapping_id = g.v;
        } else if (g.field == 3 && g.wt == 0) {
            o->address = g.v;
        } else if (g.field == 4 && g.wt == 2) {
            if (o->nlines++ == 0) {
                pbr l = pb_sub(&g);
                pbf h;
                while (pb_next(&l, &h))
                    if (h.field == 1 && h.wt == 0)
                        o->function = h.v;
                if (l.bad)
                    return false;
            }
        }
    }
    return !s.bad;
}

static bool function(pbr s, tp_function *o)
{
    uint64_t v[4] = {0};
    if (!varints(s, v, 4))
        return false;
    *o = (tp_function){v[0], (int64_t)v[1], (int64_t)v[2], (int64_t)v[3]};
    return true;
}

static bool mapping(pbr s, tp_mapping *o)
{
    uint64_t v[7] = {0};
    if (!varints(s, v, 7))
        return false;
    *o = (tp_mapping){.id = v[0],
                      .start = v[1],
                      .limit = v[2],
                      .offset = v[3],
                      .filename = (int64_t)v[4],
                      .build_id = (int64_t)v[5],
                      .has_functions = v[6] != 0};
    return true;
}

static bool string(pbr s, tp_profile *out)
{
    size_t n = (size_t)(s.end - s.p);
    char *str = malloc(n + 1);
    if (str == NULL || !push((void **)&out->strings, &out->nstrings, sizeof(char *))) {
        free(str);
        return false;
    }
    if (n)
        memcpy(str, s.p, n);
    str[n] = '\0';
    out->strings[out->nstrings - 1] = str;
    return true;
}

/* One top-level field of a Profile into out; false when malformed. */
static bool profile_field(const pbf *f, tp_profile *out)
{
    pbr s = pb_sub(f);
    if (f->wt == 2) {
        switch (f->field) {
        case 1:
            return push((void **)&out->sample_types, &out->nsample_types,
                        sizeof *out->sample_types) &&
                   value_type(s, &out->sample_types[out->nsample_types - 1]);
        case 2:
            return push((void **)&out->samples, &out->nsamples, sizeof *out->samples) &&
                   sample(s, &out->samples[out->nsamples - 1]);
        case 3:
            return push((void **)&out->mappings, &out->nmappings, sizeof *out->mappings) &&
                   mapping(s, &out->mappings[out->nmappings - 1]);
        case 4:
            return push((void **)&out->locations, &out->nlocations, sizeof *out->locations) &&
                   location(s, &out->locations[out->nlocations - 1]);
        case 5:
            return push((void **)&out->functions, &out->nfunctions, sizeof *out->functions) &&
                   function(s, &out->functions[out->nfunctions - 1]);
        case 6:
            return string(s, out);
        case 11:
            return value_type(s, &out->period_type);
        default:
            break;
        }
    }
    if (f->field == 13 && (f->wt == 0 || f->wt == 2)) /* comment: repeated int64 */
        return repeated_varint(f, &out->comments, &out->ncomments);
    if (f->wt == 0 && f->field == 9)
        out->time_nanos = (int64_t)f->v;
    else if (f->wt == 0 && f->field == 10)
        out->duration_nanos = (int64_t)f->v;
    else if (f->wt == 0 && f->field == 12)
        out->period = (int64_t)f->v;
    return true;
}

bool tp_decode(const uint8_t *buf, size_t len, tp_profile *out)
{
    memset(out, 0, sizeof *out);
    pbr r = {buf, buf ? buf + len : NULL, false};
    pbf f;
    bool ok = true;
    while (ok && pb_next(&r, &f))
        ok = profile_field(&f, out);
    if (!ok || r.bad || out->nstrings == 0 || out->strings[0][0] != '\0') {
        tp_free(out);
        return false;
    }
    return true;
}

bool tp_decode_answer(const uint8_t *buf, size_t len, tp_profile *out)
{
    if (len > 0)
        return tp_decode(buf, len, out);
    /* an empty protobuf message: every field at its default, and the one
     * string every pprof table starts with */
    memset(out, 0, sizeof *out);
    if (!push((void **)&out->strings, &out->nstrings, sizeof(char *)))
        return false;
    out->strings[0] = calloc(1, 1);
    if (out->strings[0] == NULL) {
        tp_free(out);
        return false;
    }
    return true;
}

void tp_free(tp_profile *p)
{
    for (size_t i = 0; i < p->nsamples; i++) {
        free(p->samples[i].location_ids);
        free(p->samples[i].values);
        free(p->samples[i].labels);
    }
    for (size_t i = 0; i < p->nstrings; i++)
        free(p->strings[i]);
    free(p->samples);
    free(p->sample_types);
    free(p->locations);
    free(p->functions);
    free(p->mappings);
    free(p->strings);
    free(p->comments);
    memset(p, 0, sizeof *p);
}

const char *tp_str(const tp_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->nstrings ? p->strings[i] : "";
}

int tp_type_index(const tp_profile *p, const char *type)
{
    for (size_t i = 0; i < p->nsample_types; i++)
        if (strcmp(tp_str(p, p->sample_types[i].type), type) == 0)
            return (int)i;
    return -1;
}

const tp_location *tp_location_by_id(const tp_profile *p, uint64_t id)
{
    for (size_t i = 0; i < p->nlocations; i++)
        if (p->locations[i].id == id)
            return &p->locations[i];
    return NULL;
}

const char *tp_label_str(const tp_profile *p, const tp_sample *s, const char *key)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(tp_str(p, s->labels[i].key), key) == 0)
            return tp_str(p, s->labels[i].str);
    return NULL;
}

bool tp_label_num(const tp_profile *p, const tp_sample *s, const char *key, int64_t *num,
                  const char **unit)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(tp_str(p, s->labels[i].key), key) == 0 && s->labels[i].str == 0) {
            *num = s->labels[i].num;
            *unit = tp_str(p, s->labels[i].num_unit);
            return true;
        }
    return false;
}

int64_t tp_total_at(const tp_profile *p, int k)
{
    int64_t sum = 0;
    for (size_t i = 0; k >= 0 && i < p->nsamples; i++)
        if ((size_t)k < p->samples[i].nvalues)
            sum += p->samples[i].values[k];
    return sum;
}

int64_t tp_total(const tp_profile *p, const char *type)
{
    return tp_total_at(p, tp_type_index(p, type));
}

/* The name of the function of location `id`'s first line ("" if none). */
static const char *location_name(const tp_profile *p, uint64_t id)
{
    const tp_location *l = tp_location_by_id(p, id);
    for (size_t k = 0; l != NULL && k < p->nfunctions; k++)
        if (p->functions[k].id == l->function)
            return tp_str(p, p->functions[k].name);
    return "";
}

int64_t tp_total_func(const tp_profile *p, int k, const char *func)
{
    int64_t sum = 0;
    for (size_t i = 0; k >= 0 && i < p->nsamples; i++) {
        const tp_sample *s = &p->samples[i];
        for (size_t j = 0; j < s->nlocations; j++) {
            if (strcmp(location_name(p, s->location_ids[j]), func) == 0) {
                if ((size_t)k < s->nvalues)
                    sum += s->values[k];
                break;
            }
        }
    }
    return sum;
}

uint64_t tp_leaf_address(const tp_profile *p, const tp_sample *s)
{
    if (s->nlocations == 0)
        return 0;
    const tp_location *l = tp_location_by_id(p, s->location_ids[0]);
    return l ? l->address : 0;
}

const char *tp_leaf(const tp_profile *p, size_t i)
{
    return p->samples[i].nlocations ? location_name(p, p->samples[i].location_ids[0]) : "";
}
