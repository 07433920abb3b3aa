/* SPDX-License-Identifier: MIT */
/* Test-only pprof wire decoder (see pprof_decode.h).
 *
 * Protobuf wire format: each field is a varint key (field << 3 | wire
 * type); wire type 0 = varint, 1 = 64-bit, 2 = length-delimited (strings,
 * messages, packed repeated scalars), 5 = 32-bit. Repeated scalar fields
 * may arrive packed (type 2) or one per key (type 0); both are accepted. */
#include "pprof_decode.h"

#include <stdlib.h>
#include <string.h>

typedef struct rd {
    const uint8_t *p, *end;
    bool bad;
} rd;

static uint64_t varint(rd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            r->bad = true;
            return 0;
        }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = true;
    return 0;
}

/* Reads a length-delimited field's bounds. */
static rd sub(rd *r)
{
    uint64_t n = varint(r);
    rd s = {r->p, r->p, false};
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return s;
    }
    s.end = r->p + n;
    r->p += n;
    return s;
}

static void skip(rd *r, unsigned wt)
{
    switch (wt) {
    case 0:
        (void)varint(r);
        break;
    case 1:
        if (r->end - r->p < 8)
            r->bad = true;
        else
            r->p += 8;
        break;
    case 2:
        (void)sub(r);
        break;
    case 5:
        if (r->end - r->p < 4)
            r->bad = true;
        else
            r->p += 4;
        break;
    default:
        r->bad = true;
    }
}

static bool push(void **arr, size_t *n, size_t elem)
{
    void *a = realloc(*arr, (*n + 1) * elem);
    if (a == NULL)
        return false;
    *arr = a;
    memset((char *)a + *n * elem, 0, elem);
    (*n)++;
    return true;
}

/* A repeated varint field, packed or not. */
static bool repeated_varint(rd *r, unsigned wt, uint64_t **arr, size_t *n)
{
    if (wt == 0) {
        uint64_t v = varint(r);
        if (!push((void **)arr, n, sizeof **arr))
            return false;
        (*arr)[*n - 1] = v;
        return !r->bad;
    }
    if (wt != 2)
        return false;
    rd s = sub(r);
    while (!r->bad && !s.bad && s.p < s.end) {
        uint64_t v = varint(&s);
        if (!push((void **)arr, n, sizeof **arr))
            return false;
        (*arr)[*n - 1] = v;
    }
    return !r->bad && !s.bad;
}

static bool value_type(rd s, tp_value_type *vt)
{
    while (s.p < s.end && !s.bad) {
        uint64_t key = varint(&s);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (f == 1 && wt == 0)
            vt->type = (int64_t)varint(&s);
        else if (f == 2 && wt == 0)
            vt->unit = (int64_t)varint(&s);
        else
            skip(&s, wt);
    }
    return !s.bad;
}

static bool label(rd s, tp_label *l)
{
    while (s.p < s.end && !s.bad) {
        uint64_t key = varint(&s);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (f == 1 && wt == 0)
            l->key = (int64_t)varint(&s);
        else if (f == 2 && wt == 0)
            l->str = (int64_t)varint(&s);
        else if (f == 3 && wt == 0)
            l->num = (int64_t)varint(&s);
        else if (f == 4 && wt == 0)
            l->num_unit = (int64_t)varint(&s);
        else
            skip(&s, wt);
    }
    return !s.bad;
}

static bool sample(rd s, tp_sample *o)
{
    while (s.p < s.end && !s.bad) {
        uint64_t key = varint(&s);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (f == 1) {
            if (!repeated_varint(&s, wt, &o->location_ids, &o->nlocations))
                return false;
        } else if (f == 2) {
            if (!repeated_varint(&s, wt, (uint64_t **)&o->values, &o->nvalues))
                return false;
        } else if (f == 3 && wt == 2) {
            if (!push((void **)&o->labels, &o->nlabels, sizeof *o->labels) ||
                !label(sub(&s), &o->labels[o->nlabels - 1]))
                return false;
        } else {
            skip(&s, wt);
        }
    }
    return !s.bad;
}

static bool location(rd s, tp_location *o)
{
    while (s.p < s.end && !s.bad) {
        uint64_t key = varint(&s);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (f == 1 && wt == 0)
            o->id = varint(&s);
        else if (f == 2 && wt == 0)
            o->mapping_id = varint(&s);
        else if (f == 3 && wt == 0)
            o->address = varint(&s);
        else if (f == 4 && wt == 2) {
            (void)sub(&s);
            o->nlines++;
        } else
            skip(&s, wt);
    }
    return !s.bad;
}

static bool mapping(rd s, tp_mapping *o)
{
    while (s.p < s.end && !s.bad) {
        uint64_t key = varint(&s);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (wt != 0) {
            skip(&s, wt);
            continue;
        }
        uint64_t v = varint(&s);
        switch (f) {
        case 1:
            o->id = v;
            break;
        case 2:
            o->start = v;
            break;
        case 3:
            o->limit = v;
            break;
        case 4:
            o->offset = v;
            break;
        case 5:
            o->filename = (int64_t)v;
            break;
        case 6:
            o->build_id = (int64_t)v;
            break;
        default:
            break;
        }
    }
    return !s.bad;
}

bool tp_decode(const uint8_t *buf, size_t len, tp_profile *out)
{
    memset(out, 0, sizeof *out);
    rd r = {buf, buf + len, false};
    bool ok = true;
    while (ok && r.p < r.end && !r.bad) {
        uint64_t key = varint(&r);
        unsigned f = (unsigned)(key >> 3), wt = key & 7;
        if (wt == 2 && (f == 1 || f == 2 || f == 3 || f == 4 || f == 6 || f == 11)) {
            rd s = sub(&r);
            if (r.bad)
                break;
            switch (f) {
            case 1:
                ok = push((void **)&out->sample_types, &out->nsample_types,
                          sizeof *out->sample_types) &&
                     value_type(s, &out->sample_types[out->nsample_types - 1]);
                break;
            case 2:
                ok = push((void **)&out->samples, &out->nsamples, sizeof *out->samples) &&
                     sample(s, &out->samples[out->nsamples - 1]);
                break;
            case 3:
                ok = push((void **)&out->mappings, &out->nmappings, sizeof *out->mappings) &&
                     mapping(s, &out->mappings[out->nmappings - 1]);
                break;
            case 4:
                ok = push((void **)&out->locations, &out->nlocations, sizeof *out->locations) &&
                     location(s, &out->locations[out->nlocations - 1]);
                break;
            case 6: {
                size_t n = (size_t)(s.end - s.p);
                char *str = malloc(n + 1);
                ok = str != NULL && push((void **)&out->strings, &out->nstrings, sizeof(char *));
                if (ok) {
                    memcpy(str, s.p, n);
                    str[n] = '\0';
                    out->strings[out->nstrings - 1] = str;
                } else {
                    free(str);
                }
                break;
            }
            case 11:
                ok = value_type(s, &out->period_type);
                break;
            }
        } else if (f == 13 && (wt == 0 || wt == 2)) { /* comment: repeated int64 */
            ok = repeated_varint(&r, wt, &out->comments, &out->ncomments);
        } else if (wt == 0 && (f == 9 || f == 10 || f == 12)) {
            int64_t v = (int64_t)varint(&r);
            if (f == 9)
                out->time_nanos = v;
            else if (f == 10)
                out->duration_nanos = v;
            else
                out->period = v;
        } else {
            skip(&r, wt);
        }
    }
    if (!ok || r.bad || out->nstrings == 0 || out->strings[0][0] != '\0') {
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

int64_t tp_total(const tp_profile *p, const char *type)
{
    int k = tp_type_index(p, type);
    int64_t sum = 0;
    if (k < 0)
        return 0;
    for (size_t i = 0; i < p->nsamples; i++)
        if ((size_t)k < p->samples[i].nvalues)
            sum += p->samples[i].values[k];
    return sum;
}

uint64_t tp_leaf_address(const tp_profile *p, const tp_sample *s)
{
    if (s->nlocations == 0)
        return 0;
    const tp_location *l = tp_location_by_id(p, s->location_ids[0]);
    return l ? l->address : 0;
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
