/* SPDX-License-Identifier: MIT */
/* Reading pprof: gzip (gunzip.c) -> protobuf-c (profile.proto, generated
 * by src/report's build) -> the flat model of pprof_reader.h, checking
 * every reference on the way. Queries of the model: pprof_model.c. */
#define _GNU_SOURCE
#include "pprof_reader.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "ages.h"
#include "fail.h"
#include "gunzip.h"
#include "pprof_bound.h"
#include "profile.pb-c.h"
#include "reader_tables.h"
#include "units.h"

typedef Perftools__Profiles__Profile PB_Profile;

/* The bound on what a reader holds (MIMPROF_READ_LIMIT, else
 * MPT_READ_LIMIT_DEFAULT); junk in the variable is said once and the
 * default used. */
size_t mpt_read_limit(void)
{
    static bool said;
    const char *v = getenv("MIMPROF_READ_LIMIT");
    uint64_t n = 0;
    if (v == NULL || *v == '\0')
        return MPT_READ_LIMIT_DEFAULT;
    if (mpt_parse_size(v, &n) && n >= 4096 && n <= (SIZE_MAX >> 3))
        return (size_t)n;
    if (!said)
        fprintf(stderr, "mimprof: MIMPROF_READ_LIMIT=%s is not a size of at least 4k; %zu MiB\n", v,
                (size_t)MPT_READ_LIMIT_DEFAULT >> 20);
    said = true;
    return MPT_READ_LIMIT_DEFAULT;
}

void mpt_limits_init(mpt_limits *lim)
{
    /* What is held at once: the input, then its inflated bytes (<= R),
     * then protobuf-c's unpacked message (<= 3R/2) and the model (frames
     * <= R/2 bytes): about 3R at the peak (cli/README.md, "Bounds"). */
    size_t r = mpt_read_limit();
    lim->max_inflated = r;
    lim->max_frames = r / 8;
    lim->max_decoded = r + r / 2;
    lim->raw_names = false;
    lim->older_than_ns = -1;
    lim->younger_than_ns = -1;
}

typedef struct decoder {
    const PB_Profile *pb;
    char *err;
    size_t errlen;
} decoder;

/* The string at index i, or NULL (with err set) when out of range. */
static const char *str_at(decoder *d, int64_t i, const char *what)
{
    if (i < 0 || (uint64_t)i >= d->pb->n_string_table) {
        mpt_fail(d->err, d->errlen, "%s refers to string %lld, but the table has %zu", what,
                 (long long)i, d->pb->n_string_table);
        return NULL;
    }
    const char *s = d->pb->string_table[i];
    return s != NULL ? s : "";
}

static char *dup_or_null(const char *s) { return strdup(s != NULL ? s : ""); }

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL && slash[1] != '\0' ? slash + 1 : path;
}

static int decode(decoder *d, const mpt_limits *lim, mpt_profile *p)
{
    const PB_Profile *pb = d->pb;
    char *err = d->err;
    size_t errlen = d->errlen;
    int rc = -1;
    mpt_interner in = {0};
    mpt_idmap fmap = {0}, mmap_ = {0}, lmap = {0};
    size_t *loc_off = NULL; /* frames of each location: loc_frames[loc_off[i] .. loc_off[i+1]) */
    uint32_t *loc_frames = NULL;
    int64_t *fname = NULL;      /* interned name id per function, -1 = unnamed */
    int64_t *sample_age = NULL; /* per pb sample: its age in ns, -1 = none */

    /* Sample types. */
    p->ntypes = pb->n_sample_type;
    p->type_name = calloc(p->ntypes + 1, sizeof *p->type_name);
    p->type_unit = calloc(p->ntypes + 1, sizeof *p->type_unit);
    if (p->type_name == NULL || p->type_unit == NULL)
        goto oom;
    for (size_t t = 0; t < p->ntypes; t++) {
        const Perftools__Profiles__ValueType *vt = pb->sample_type[t];
        const char *tn = str_at(d, vt->type, "a sample type");
        const char *tu = tn != NULL ? str_at(d, vt->unit, "a sample unit") : NULL;
        if (tn == NULL || tu == NULL)
            goto out;
        p->type_name[t] = dup_or_null(tn);
        p->type_unit[t] = dup_or_null(tu);
        if (p->type_name[t] == NULL || p->type_unit[t] == NULL)
            goto oom;
    }
    p->default_type = p->ntypes > 0 ? p->ntypes - 1 : 0;
    if (pb->default_sample_type != 0) {
        const char *dn = str_at(d, pb->default_sample_type, "default_sample_type");
        if (dn == NULL)
            goto out;
        for (size_t t = 0; t < p->ntypes; t++)
            if (strcmp(p->type_name[t], dn) == 0)
                p->default_type = t;
    }
    p->period = pb->period;
    const char *pt = "", *pu = "";
    if (pb->period_type != NULL) {
        pt = str_at(d, pb->period_type->type, "period_type");
        pu = pt != NULL ? str_at(d, pb->period_type->unit, "period_type unit") : NULL;
        if (pt == NULL || pu == NULL)
            goto out;
    }
    p->period_type = dup_or_null(pt);
    p->period_unit = dup_or_null(pu);
    if (p->period_type == NULL || p->period_unit == NULL)
        goto oom;
    p->time_nanos = pb->time_nanos;
    p->duration_nanos = pb->duration_nanos;
    /* The program: the first mapping's file (pprof's convention: the main
     * binary comes first), its base name; "" when the file has none. */
    const char *main_path = "";
    if (pb->n_mapping > 0 && pb->mapping[0]->filename != 0 &&
        (main_path = str_at(d, pb->mapping[0]->filename, "a mapping's file name")) == NULL)
        goto out;
    if ((p->program = strdup(base_name(main_path))) == NULL)
        goto oom;
    p->comments = calloc(pb->n_comment + 1, sizeof *p->comments);
    if (p->comments == NULL)
        goto oom;
    for (size_t i = 0; i < pb->n_comment; i++) {
        const char *c = str_at(d, pb->comment[i], "a comment");
        if (c == NULL)
            goto out;
        if ((p->comments[i] = strdup(c)) == NULL)
            goto oom;
        p->ncomments = i + 1;
    }

    /* Functions: id -> interned name. */
    if (mpt_idmap_init(&fmap, pb->n_function) != 0 || mpt_idmap_init(&mmap_, pb->n_mapping) != 0 ||
        mpt_idmap_init(&lmap, pb->n_location) != 0)
        goto oom;
    fname = malloc((pb->n_function + 1) * sizeof *fname);
    if (fname == NULL)
        goto oom;
    for (size_t i = 0; i < pb->n_function; i++) {
        const Perftools__Profiles__Function *f = pb->function[i];
        if (mpt_idmap_put(&fmap, f->id, (uint32_t)i) == 0) {
            mpt_fail(err, errlen, "function id %llu appears twice", (unsigned long long)f->id);
            goto out;
        }
        const char *name = str_at(d, f->name, "a function name");
        const char *sys = name != NULL ? str_at(d, f->system_name, "a function system name") : NULL;
        if (name == NULL || sys == NULL || str_at(d, f->filename, "a function file name") == NULL)
            goto out;
        if (name[0] == '\0' || (lim->raw_names && sys[0] != '\0'))
            name = sys;
        char human[4096];
        size_t hlen;
        if (!lim->raw_names && mp_prof_demangle(name, human, sizeof human, &hlen) == MP_PROF_OK &&
            hlen < sizeof human)
            name = human;
        fname[i] = -1;
        if (name[0] != '\0' && (fname[i] = mpt_intern(&in, name)) < 0)
            goto oom;
    }
    for (size_t i = 0; i < pb->n_mapping; i++) {
        const Perftools__Profiles__Mapping *m = pb->mapping[i];
        if (mpt_idmap_put(&mmap_, m->id, (uint32_t)i) == 0) {
            mpt_fail(err, errlen, "mapping id %llu appears twice", (unsigned long long)m->id);
            goto out;
        }
        if (str_at(d, m->filename, "a mapping file name") == NULL ||
            str_at(d, m->build_id, "a mapping build id") == NULL)
            goto out;
    }

    /* Locations: each expands to its frames (lines innermost first). */
    size_t nlocframes = 0;
    for (size_t i = 0; i < pb->n_location; i++) {
        const Perftools__Profiles__Location *l = pb->location[i];
        if (mpt_idmap_put(&lmap, l->id, (uint32_t)i) == 0) {
            mpt_fail(err, errlen, "location id %llu appears twice", (unsigned long long)l->id);
            goto out;
        }
        nlocframes += l->n_line > 0 ? l->n_line : 1;
    }
    if (nlocframes > lim->max_frames) {
        mpt_fail(err, errlen, "too many frames (%zu > %zu)", nlocframes, lim->max_frames);
        goto out;
    }
    loc_off = malloc((pb->n_location + 1) * sizeof *loc_off);
    loc_frames = malloc((nlocframes + 1) * sizeof *loc_frames);
    if (loc_off == NULL || loc_frames == NULL)
        goto oom;
    size_t k = 0;
    for (size_t i = 0; i < pb->n_location; i++) {
        const Perftools__Profiles__Location *l = pb->location[i];
        loc_off[i] = k;
        const Perftools__Profiles__Mapping *m = NULL;
        uint32_t mi;
        if (l->mapping_id != 0) {
            if (!mpt_idmap_get(&mmap_, l->mapping_id, &mi)) {
                mpt_fail(err, errlen, "location %llu refers to missing mapping %llu",
                         (unsigned long long)l->id, (unsigned long long)l->mapping_id);
                goto out;
            }
            m = pb->mapping[mi];
        }
        bool named = false;
        for (size_t j = 0; j < l->n_line; j++) {
            uint32_t fi;
            int64_t id = -1;
            if (l->line[j]->function_id != 0) {
                if (!mpt_idmap_get(&fmap, l->line[j]->function_id, &fi)) {
                    mpt_fail(err, errlen, "location %llu refers to missing function %llu",
                             (unsigned long long)l->id,
                             (unsigned long long)l->line[j]->function_id);
                    goto out;
                }
                id = fname[fi];
            }
            if (id >= 0) {
                loc_frames[k++] = (uint32_t)id;
                named = true;
            }
        }
        if (!named) {
            char buf[320];
            const char *file = m != NULL ? d->pb->string_table[m->filename] : NULL;
            if (file != NULL && file[0] != '\0' && l->address >= m->memory_start)
                snprintf(buf, sizeof buf, "%.256s+0x%llx", base_name(file),
                         (unsigned long long)(l->address - m->memory_start + m->file_offset));
            else
                snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)l->address);
            int64_t id = mpt_intern(&in, buf);
            if (id < 0)
                goto oom;
            loc_frames[k++] = (uint32_t)id;
        }
    }
    loc_off[pb->n_location] = k;

    /* Samples: checked, their ages read, the age filters applied. */
    size_t nframes = 0, kept = 0;
    int64_t age_key = -1; /* string index of "age", if the table has it */
    for (size_t i = 0; i < pb->n_string_table; i++)
        if (pb->string_table[i] != NULL && strcmp(pb->string_table[i], "age") == 0) {
            age_key = (int64_t)i;
            break;
        }
    sample_age = malloc((pb->n_sample + 1) * sizeof *sample_age);
    if (sample_age == NULL)
        goto oom;
    for (size_t s = 0; s < pb->n_sample; s++) {
        const Perftools__Profiles__Sample *sm = pb->sample[s];
        if (sm->n_value != p->ntypes) {
            mpt_fail(err, errlen, "sample %zu has %zu values for %zu sample types", s, sm->n_value,
                     p->ntypes);
            goto out;
        }
        for (size_t j = 0; j < sm->n_location_id; j++) {
            uint32_t li;
            if (!mpt_idmap_get(&lmap, sm->location_id[j], &li)) {
                mpt_fail(err, errlen, "sample %zu refers to missing location %llu", s,
                         (unsigned long long)sm->location_id[j]);
                goto out;
            }
            nframes += loc_off[li + 1] - loc_off[li];
            if (nframes > lim->max_frames) {
                mpt_fail(err, errlen, "too many frames (> %zu)", lim->max_frames);
                goto out;
            }
        }
        sample_age[s] = -1;
        for (size_t j = 0; j < sm->n_label; j++) {
            const Perftools__Profiles__Label *lb = sm->label[j];
            const char *unit = str_at(d, lb->num_unit, "a label unit");
            if (str_at(d, lb->key, "a label key") == NULL ||
                str_at(d, lb->str, "a label") == NULL || unit == NULL)
                goto out;
            if (lb->key == age_key && lb->str == 0)
                sample_age[s] = mpt_time_label_ns(lb->num, unit);
        }
        kept += mpt_age_passes(lim, sample_age[s]);
    }
    p->nsamples = kept;
    p->stack_off = malloc((p->nsamples + 1) * sizeof *p->stack_off);
    p->frames = malloc((nframes + 1) * sizeof *p->frames);
    p->values = malloc((p->nsamples * p->ntypes + 1) * sizeof *p->values);
    p->age_ns = malloc((p->nsamples + 1) * sizeof *p->age_ns);
    if (p->stack_off == NULL || p->frames == NULL || p->values == NULL || p->age_ns == NULL)
        goto oom;
    size_t f = 0, o = 0;
    for (size_t s = 0; s < pb->n_sample; s++) {
        const Perftools__Profiles__Sample *sm = pb->sample[s];
        if (!mpt_age_passes(lim, sample_age[s]))
            continue;
        p->stack_off[o] = f;
        p->age_ns[o] = sample_age[s];
        for (size_t j = 0; j < sm->n_location_id; j++) {
            uint32_t li;
            mpt_idmap_get(&lmap, sm->location_id[j], &li);
            for (size_t x = loc_off[li]; x < loc_off[li + 1]; x++)
                p->frames[f++] = loc_frames[x];
        }
        if (p->ntypes > 0)
            memcpy(p->values + o * p->ntypes, sm->value, p->ntypes * sizeof *p->values);
        o++;
    }
    p->stack_off[p->nsamples] = f;
    p->names = in.names;
    p->nnames = in.n;
    in.names = NULL;
    rc = 0;
    goto out;
oom:
    mpt_fail(err, errlen, "out of memory");
out:
    for (size_t i = 0; in.names != NULL && i < in.n; i++)
        free(in.names[i]);
    free(in.names);
    free(in.slots);
    mpt_idmap_free(&fmap);
    mpt_idmap_free(&mmap_);
    mpt_idmap_free(&lmap);
    free(loc_off);
    free(loc_frames);
    free(fname);
    free(sample_age);
    return rc;
}

int mpt_profile_parse(const uint8_t *data, size_t len, const mpt_limits *lim, mpt_profile **out,
                      char *err, size_t errlen)
{
    mpt_limits dl;
    if (lim == NULL) {
        mpt_limits_init(&dl);
        lim = &dl;
    }
    uint8_t *raw = NULL;
    size_t rawlen = len;
    if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        if (mpt_gunzip(data, len, lim->max_inflated, &raw, &rawlen, err, errlen) != 0)
            return -1;
        data = raw;
    } else if (len > lim->max_inflated) {
        return mpt_fail(err, errlen, "file larger than the limit of %zu bytes", lim->max_inflated);
    }
    /* protobuf-c expands its input up to ~60 times: bounded before it
     * allocates anything. */
    size_t decoded = mpt_pprof_decoded_size(data, rawlen);
    if (decoded != SIZE_MAX && decoded > lim->max_decoded) {
        free(raw);
        return mpt_fail(err, errlen,
                        "decoding would take %zu MiB, more than the limit of %zu MiB (too many "
                        "samples, locations or strings)",
                        decoded >> 20, lim->max_decoded >> 20);
    }
    PB_Profile *pb = perftools__profiles__profile__unpack(NULL, rawlen, data);
    free(raw);
    if (pb == NULL)
        return mpt_fail(err, errlen, "not a pprof profile (protobuf decoding failed)");
    mpt_profile *p = calloc(1, sizeof *p);
    if (p == NULL) {
        perftools__profiles__profile__free_unpacked(pb, NULL);
        return mpt_fail(err, errlen, "out of memory");
    }
    decoder d = {pb, err, errlen};
    int rc = decode(&d, lim, p);
    perftools__profiles__profile__free_unpacked(pb, NULL);
    if (rc != 0) {
        mpt_profile_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int mpt_read_bounded(const char *path, size_t max, uint8_t **out, size_t *outlen, char *err,
                     size_t errlen)
{
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *fp = is_stdin ? stdin : fopen(path, "rb");
    if (fp == NULL)
        return mpt_fail(err, errlen, "%s: %s", path, strerror(errno));
    size_t cap = 65536, len = 0;
    uint8_t *buf = malloc(cap);
    int rc = -1;
    if (buf == NULL) {
        mpt_fail(err, errlen, "out of memory");
        goto done;
    }
    for (;;) {
        if (len == cap) {
            /* one byte past the bound says the input is larger */
            if (cap > max) {
                mpt_fail(err, errlen, "%s: larger than the limit of %zu MiB (MIMPROF_READ_LIMIT)",
                         path, max >> 20);
                goto done;
            }
            size_t ncap = cap * 2 < max + 1 ? cap * 2 : max + 1;
            uint8_t *nb = realloc(buf, ncap);
            if (nb == NULL) {
                mpt_fail(err, errlen, "out of memory");
                goto done;
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + len, 1, cap - len, fp);
        len += r;
        if (r == 0) {
            if (ferror(fp)) {
                mpt_fail(err, errlen, "%s: %s", path, strerror(errno));
                goto done;
            }
            break;
        }
    }
    if (len == 0) {
        mpt_fail(err, errlen, "%s: empty file", path);
        goto done;
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    if (!is_stdin)
        fclose(fp);
    return rc;
}

int mpt_profile_load(const char *path, const mpt_limits *lim, mpt_profile **out, char *err,
                     size_t errlen)
{
    mpt_limits dl;
    if (lim == NULL) {
        mpt_limits_init(&dl);
        lim = &dl;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (mpt_read_bounded(path, lim->max_inflated, &buf, &len, err, errlen) != 0)
        return -1;
    char inner[512];
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
        /* inflated first and the input let go: never both held while
         * protobuf-c unpacks */
        uint8_t *raw = NULL;
        size_t rawlen = 0;
        int z = mpt_gunzip(buf, len, lim->max_inflated, &raw, &rawlen, inner, sizeof inner);
        free(buf);
        if (z != 0)
            return mpt_fail(err, errlen, "%s: %s (MIMPROF_READ_LIMIT)", path, inner);
        buf = raw;
        len = rawlen;
        if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
            free(buf);
            return mpt_fail(err, errlen, "%s: gzip inside gzip", path);
        }
    }
    int rc = mpt_profile_parse(buf, len, lim, out, inner, sizeof inner);
    free(buf);
    if (rc != 0)
        return mpt_fail(err, errlen, "%s: %s", path, inner);
    return 0;
}
