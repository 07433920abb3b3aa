/* SPDX-License-Identifier: MIT */
/* Symbol quality classifier (public: mp_prof_classify_symbols). */
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling.h>

#include "profile.pb-c.h"
#include "quality.h"

/* Largest profile the classifier decodes; protobuf-c needs memory of the
 * order of the input, and a classifier is no reason to exhaust it. */
#define MAX_CLASSIFY_BYTES ((size_t)1 << 30)

mp_prof_symbol_quality mp_quality_from_counts(uint64_t frames, uint64_t with_function,
                                              uint64_t with_line)
{
    if (frames == 0)
        return MP_PROF_QUALITY_ADDRESSES_ONLY;
    if (with_function > frames)
        with_function = frames;
    if (with_line > frames)
        with_line = frames;
    /* Shares compared as integers: x / n >= p / 100  <=>  100 x >= p n.
     * (Counts beyond 2^64 / 100 cannot come from a profile in memory;
     * they are scaled down rather than overflow.) */
    while (frames > UINT64_MAX / 100) {
        frames >>= 1;
        with_function >>= 1;
        with_line >>= 1;
    }
    uint64_t n = frames, f = with_function, l = with_line;
    if (f * 100 >= n * MP_QUALITY_FULL_FUNCTIONS_PCT) {
        if (l * 100 >= n * MP_QUALITY_FULL_LINES_PCT)
            return MP_PROF_QUALITY_FULL;
        return MP_PROF_QUALITY_FUNCTIONS;
    }
    if (f * 100 >= n * MP_QUALITY_PARTIAL_FUNCTIONS_PCT)
        return MP_PROF_QUALITY_PARTIAL;
    return MP_PROF_QUALITY_ADDRESSES_ONLY;
}

const char *mp_prof_symbol_quality_name(mp_prof_symbol_quality q)
{
    switch (q) {
    case MP_PROF_QUALITY_FULL:
        return "FULL";
    case MP_PROF_QUALITY_FUNCTIONS:
        return "FUNCTIONS";
    case MP_PROF_QUALITY_PARTIAL:
        return "PARTIAL";
    case MP_PROF_QUALITY_ADDRESSES_ONLY:
        return "ADDRESSES_ONLY";
    }
    return "UNKNOWN";
}

typedef struct fn_ref {
    uint64_t id;
    const Perftools__Profiles__Function *fn;
} fn_ref;

static int fn_cmp(const void *a, const void *b)
{
    const fn_ref *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

static const Perftools__Profiles__Function *find_fn(const fn_ref *t, size_t n, uint64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].id == id)
            return t[mid].fn;
        if (t[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool str_ok(const Perftools__Profiles__Profile *p, int64_t i)
{
    return i >= 0 && (uint64_t)i < p->n_string_table;
}

static const char *str_at(const Perftools__Profiles__Profile *p, int64_t i)
{
    const char *s = str_ok(p, i) ? p->string_table[i] : NULL;
    return s != NULL ? s : "";
}

mp_prof_status mp_prof_classify_symbols(const uint8_t *pprof, size_t len,
                                        mp_prof_symbol_quality *out)
{
    if (out == NULL || (pprof == NULL && len != 0) || len > MAX_CLASSIFY_BYTES)
        return MP_PROF_E_INVALID_CONFIG;
    Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(
        NULL, len, pprof != NULL ? pprof : (const uint8_t *)"");
    if (p == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    /* An encoded profile's string table starts with "" (or is empty). */
    bool ok =
        p->n_string_table == 0 || (p->string_table[0] != NULL && p->string_table[0][0] == '\0');
    fn_ref *fns = NULL;
    if (ok && p->n_function > 0) {
        fns = malloc(p->n_function * sizeof *fns);
        if (fns == NULL) {
            perftools__profiles__profile__free_unpacked(p, NULL);
            return MP_PROF_E_NOMEM;
        }
        for (size_t i = 0; i < p->n_function && ok; i++) {
            const Perftools__Profiles__Function *f = p->function[i];
            ok = f->id != 0 && str_ok(p, f->name) && str_ok(p, f->filename) &&
                 str_ok(p, f->system_name);
            fns[i].id = f->id;
            fns[i].fn = f;
        }
        if (ok)
            qsort(fns, p->n_function, sizeof *fns, fn_cmp);
    }
    uint64_t frames = 0, named = 0, lined = 0;
    for (size_t i = 0; ok && i < p->n_location; i++) {
        const Perftools__Profiles__Location *loc = p->location[i];
        if (loc->n_line == 0) {
            frames++;
            continue;
        }
        bool marker = true;
        for (size_t j = 0; j < loc->n_line; j++) {
            const Perftools__Profiles__Function *f =
                find_fn(fns, p->n_function, loc->line[j]->function_id);
            if (f == NULL || strcmp(str_at(p, f->name), MP_TRUNCATED_FRAME) != 0)
                marker = false;
        }
        if (marker)
            continue;
        for (size_t j = 0; j < loc->n_line; j++) {
            const Perftools__Profiles__Line *ln = loc->line[j];
            const Perftools__Profiles__Function *f = find_fn(fns, p->n_function, ln->function_id);
            frames++;
            if (f != NULL && str_at(p, f->name)[0] != '\0')
                named++;
            if (f != NULL && str_at(p, f->filename)[0] != '\0' && ln->line > 0)
                lined++;
        }
    }
    free(fns);
    perftools__profiles__profile__free_unpacked(p, NULL);
    if (!ok)
        return MP_PROF_E_INVALID_CONFIG;
    *out = mp_quality_from_counts(frames, named, lined);
    return MP_PROF_OK;
}
