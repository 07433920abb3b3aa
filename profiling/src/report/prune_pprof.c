/* SPDX-License-Identifier: MIT */
/* mp_report_prune_pprof (drop.h), mp_prof_pprof_prune's work: an encoded profile's
 * own drop_frames applied to its stacks, with prune.c's rule, for a
 * profile named after it was written. Works on the decoded profile:
 * locations and functions are found by id (sorted id tables). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "drop.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile profile;

typedef struct {
    uint64_t id;
    size_t at;
} id_at;

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const id_at *)a)->id, y = ((const id_at *)b)->id;
    return x < y ? -1 : x > y;
}

/* Index of `id` in a sorted table of n; SIZE_MAX when absent. */
static size_t find(const id_at *t, size_t n, uint64_t id)
{
    id_at key = {id, 0};
    const id_at *hit = bsearch(&key, t, n, sizeof *t, by_id);
    return hit != NULL ? hit->at : SIZE_MAX;
}

static const char *fname(const profile *p, const id_at *fns, uint64_t id)
{
    size_t f = find(fns, p->n_function, id);
    if (f == SIZE_MAX)
        return NULL;
    int64_t s = p->function[f]->name;
    return s > 0 && (size_t)s < p->n_string_table ? p->string_table[s] : NULL;
}

/* What location l has of the pattern; its inner lines that match are
 * freed and left out (pprof trims the location itself). */
static mp_prune_match match_location(mp_drop *d, const profile *p, const id_at *fns,
                                     Perftools__Profiles__Location *l)
{
    for (size_t k = l->n_line; k-- > 0;) {
        const char *name = fname(p, fns, l->line[k]->function_id);
        if (name == NULL || name[0] == '\0' || !mp_drop_matches(d, name))
            continue;
        if (k == l->n_line - 1)
            return MP_PRUNE_WHOLE;
        for (size_t j = 0; j <= k; j++)
            perftools__profiles__line__free_unpacked(l->line[j], NULL);
        memmove(l->line, l->line + k + 1, (l->n_line - k - 1) * sizeof *l->line);
        l->n_line -= k + 1;
        return MP_PRUNE_INNER;
    }
    return MP_PRUNE_NONE;
}

typedef struct {
    const uint64_t *ids;
    const id_at *locs;
    size_t nloc;
    const mp_prune_match *m;
} stack_view;

static mp_prune_match match_at(void *ctx, size_t j)
{
    const stack_view *v = ctx;
    size_t i = find(v->locs, v->nloc, v->ids[j]);
    return i == SIZE_MAX ? MP_PRUNE_NONE : v->m[i];
}

/* Prunes p at d; false on out-of-memory. */
static bool prune(profile *p, mp_drop *d)
{
    id_at *fns = malloc((p->n_function ? p->n_function : 1) * sizeof *fns);
    id_at *locs = malloc((p->n_location ? p->n_location : 1) * sizeof *locs);
    mp_prune_match *m = malloc((p->n_location ? p->n_location : 1) * sizeof *m);
    bool *used = calloc(p->n_location ? p->n_location : 1, sizeof *used);
    bool ok = fns != NULL && locs != NULL && m != NULL && used != NULL;
    if (ok) {
        for (size_t i = 0; i < p->n_function; i++)
            fns[i] = (id_at){p->function[i]->id, i};
        for (size_t i = 0; i < p->n_location; i++)
            locs[i] = (id_at){p->location[i]->id, i};
        qsort(fns, p->n_function, sizeof *fns, by_id);
        qsort(locs, p->n_location, sizeof *locs, by_id);
        for (size_t i = 0; i < p->n_location; i++)
            m[i] = match_location(d, p, fns, p->location[i]);
        for (size_t s = 0; s < p->n_sample; s++) {
            Perftools__Profiles__Sample *x = p->sample[s];
            stack_view v = {x->location_id, locs, p->n_location, m};
            size_t cut = mp_prune_cut(x->n_location_id, match_at, &v);
            memmove(x->location_id, x->location_id + cut,
                    (x->n_location_id - cut) * sizeof *x->location_id);
            x->n_location_id -= cut;
            for (size_t j = 0; j < x->n_location_id; j++) {
                size_t i = find(locs, p->n_location, x->location_id[j]);
                if (i != SIZE_MAX)
                    used[i] = true;
            }
        }
        size_t k = 0;
        for (size_t i = 0; i < p->n_location; i++) {
            if (used[i])
                p->location[k++] = p->location[i];
            else
                perftools__profiles__location__free_unpacked(p->location[i], NULL);
        }
        p->n_location = k;
    }
    free(fns);
    free(locs);
    free(m);
    free(used);
    return ok;
}

mp_prof_status mp_report_prune_pprof(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen)
{
    mp_prof_status st = MP_PROF_E_INVALID_CONFIG;
    profile *p = perftools__profiles__profile__unpack(NULL, len, in);
    mp_drop d = {0};
    const char *pattern =
        p != NULL && p->drop_frames > 0 && (size_t)p->drop_frames < p->n_string_table
            ? p->string_table[p->drop_frames]
            : NULL;
    if (p == NULL || (pattern != NULL && pattern[0] != '\0' && !mp_drop_compile(&d, pattern)))
        goto done;
    st = MP_PROF_E_NOMEM;
    if (d.ready && !prune(p, &d))
        goto done;
    size_t n = perftools__profiles__profile__get_packed_size(p);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        goto done;
    perftools__profiles__profile__pack(p, buf);
    *out = buf;
    *outlen = n;
    st = MP_PROF_OK;
done:
    mp_drop_end(&d);
    if (p != NULL)
        perftools__profiles__profile__free_unpacked(p, NULL);
    return st;
}
