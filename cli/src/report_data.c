/* SPDX-License-Identifier: MIT */
/* The data of `mimprof report` (report.h): each file's profile becomes a
 * moment with exact totals and a bounded set of stacks; names, stacks and
 * sites are interned across moments (a service's stacks repeat from one
 * report to the next, so the stack table stays small while the moments
 * refer to it by id). report_json.c writes them as the page's JSON. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report_data.h"

void mpt_report_opts_init(mpt_report_opts *o)
{
    o->sites = 12;
    o->site_frames = 1;
    o->stacks = 400;
    o->top_rows = 50;
}

mpt_report_data *mpt_report_data_new(const mpt_report_opts *o)
{
    mpt_report_data *d = calloc(1, sizeof *d);
    if (d != NULL)
        d->o = *o;
    return d;
}

static void moment_free(moment *m)
{
    free(m->file);
    free(m->why);
    free(m->sites);
    free(m->kept);
    free(m->ages);
    free(m->top);
}

void mpt_report_data_free(mpt_report_data *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        moment_free(&d->m[i]);
    free(d->m);
    for (size_t i = 0; i < d->nskip; i++) {
        free(d->skip_file[i]);
        free(d->skip_why[i]);
    }
    free(d->skip_file);
    free(d->skip_why);
    mpt_intern_free(&d->names);
    mpt_intern_free(&d->stacks);
    mpt_intern_free(&d->sites);
    free(d);
}

int mpt_report_data_skip(mpt_report_data *d, const char *file, const char *why)
{
    char **nf = realloc(d->skip_file, (d->nskip + 1) * sizeof *nf);
    if (nf == NULL)
        return -1;
    d->skip_file = nf;
    char **nw = realloc(d->skip_why, (d->nskip + 1) * sizeof *nw);
    if (nw == NULL)
        return -1;
    d->skip_why = nw;
    nf[d->nskip] = strdup(file);
    nw[d->nskip] = strdup(why);
    if (nf[d->nskip] == NULL || nw[d->nskip] == NULL) {
        free(nf[d->nskip]);
        free(nw[d->nskip]);
        return -1;
    }
    d->nskip++;
    return 0;
}

/* The number after `key` in `s`, or -1. */
static int64_t num_after(const char *s, const char *key)
{
    const char *k = strstr(s, key);
    if (k == NULL)
        return -1;
    char *end;
    long long v = strtoll(k + strlen(key), &end, 10);
    return end != k + strlen(key) ? (int64_t)v : -1;
}

void mpt_report_mem_parse(const mpt_profile *p, mpt_report_mem *m)
{
    *m = (mpt_report_mem){-1, -1, -1, -1, -1, ""};
    for (size_t i = 0; i < p->ncomments; i++) {
        const char *c = p->comments[i];
        if (strncmp(c, "memory rss: ", 12) == 0)
            m->rss = num_after(c, "memory rss: ");
        else if (strncmp(c, "memory live heap: ", 18) == 0)
            m->live = num_after(c, "memory live heap: ");
        else if (strncmp(c, "memory profiler: ", 17) == 0)
            m->profiler = num_after(c, "memory profiler: ");
        else if (strncmp(c, "memory allocator: ", 18) == 0) {
            m->resident = num_after(c, " resident=");
            m->committed = num_after(c, " committed=");
            size_t n = strcspn(c + 18, " ");
            if (n < sizeof m->allocator && strncmp(c + 18, "no statistics", 13) != 0) {
                memcpy(m->allocator, c + 18, n);
                m->allocator[n] = '\0';
            }
        }
    }
}

/* Global id of each of p's names; NULL when out of memory. */
static uint32_t *map_names(mpt_report_data *d, const mpt_profile *p)
{
    uint32_t *g = malloc((p->nnames + 1) * sizeof *g);
    for (size_t i = 0; g != NULL && i < p->nnames; i++) {
        int64_t id = mpt_intern_put(&d->names, p->names[i], strlen(p->names[i]));
        if (id < 0) {
            free(g);
            return NULL;
        }
        g[i] = (uint32_t)id;
    }
    return g;
}

static int by_stack_age(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return x->age < y->age ? -1 : x->age > y->age;
}

static int by_value_desc(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return by_stack_age(a, b);
}

int mpt_report_pair_by_key(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

static int top_by_flat(const void *a, const void *b)
{
    const top_row *x = a, *y = b;
    if (x->flat != y->flat)
        return x->flat > y->flat ? -1 : 1;
    if (x->cum != y->cum)
        return x->cum > y->cum ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* Sums the values of equal keys of v (sorted in place): the count left. */
static size_t merge_pairs(pair *v, size_t n)
{
    qsort(v, n, sizeof *v, mpt_report_pair_by_key);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && v[k - 1].key == v[i].key)
            v[k - 1].value = mpt_sat_add(v[k - 1].value, v[i].value);
        else
            v[k++] = v[i];
    }
    return k;
}

/* p reallocated to n elements of `size` bytes (p itself if that fails). */
static void *shrink(void *p, size_t n, size_t size)
{
    void *q = realloc(p, (n + 1) * size);
    return q != NULL ? q : p;
}

static int moment_samples_local(mpt_report_data *d, moment *m, const mpt_profile *p, size_t t,
                                const uint32_t *gname, mpt_intern *local)
{
    size_t ns = p->nsamples;
    entry *e = malloc((ns + 1) * sizeof *e);
    m->sites = malloc((ns + 1) * sizeof *m->sites);
    m->ages = malloc((ns + 1) * sizeof *m->ages);
    size_t maxdepth = 0;
    for (size_t s = 0; s < ns; s++)
        if (p->stack_off[s + 1] - p->stack_off[s] > maxdepth)
            maxdepth = p->stack_off[s + 1] - p->stack_off[s];
    uint32_t *key = malloc((maxdepth + 1) * sizeof *key);
    if (e == NULL || m->sites == NULL || m->ages == NULL || key == NULL) {
        free(e);
        free(key);
        return -2;
    }
    size_t ne = 0;
    for (size_t s = 0; s < ns; s++) {
        int64_t v = p->values[s * p->ntypes + t];
        if (v == 0)
            continue;
        size_t a = p->stack_off[s], depth = p->stack_off[s + 1] - a;
        for (size_t f = 0; f < depth; f++)
            key[f] = gname[p->frames[a + f]];
        int64_t st = mpt_intern_put(local, key, depth * sizeof *key);
        size_t sd = depth < d->o.site_frames ? depth : d->o.site_frames;
        int64_t site = mpt_intern_put(&d->sites, key, sd * sizeof *key);
        if (st < 0 || site < 0) {
            free(e);
            free(key);
            return -2;
        }
        int64_t age = p->age_ns[s] >= 0 ? p->age_ns[s] / 1000000000 : -1;
        e[ne++] = (entry){(uint32_t)st, age, v};
        m->sites[m->nsites++] = (pair){site, v};
        m->ages[m->nages++] = (pair){age, v};
    }
    free(key);
    m->nsites = merge_pairs(m->sites, m->nsites);
    m->nages = merge_pairs(m->ages, m->nages);
    /* Equal (stack, age) entries merged (names that demangle alike), then
     * the largest kept and the rest summed. */
    qsort(e, ne, sizeof *e, by_stack_age);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++) {
        if (k > 0 && e[k - 1].stack == e[i].stack && e[k - 1].age == e[i].age)
            e[k - 1].value = mpt_sat_add(e[k - 1].value, e[i].value);
        else
            e[k++] = e[i];
    }
    qsort(e, k, sizeof *e, by_value_desc);
    m->nkept = k < d->o.stacks ? k : d->o.stacks;
    for (size_t i = m->nkept; i < k; i++)
        m->other = mpt_sat_add(m->other, e[i].value);
    m->nother = k - m->nkept;
    /* Down to what is kept: a week of moments holds only these. */
    m->kept = shrink(e, m->nkept, sizeof *e);
    m->sites = shrink(m->sites, m->nsites, sizeof *m->sites);
    m->ages = shrink(m->ages, m->nages, sizeof *m->ages);
    return 0;
}

/* The entries, sites and ages of moment m from p's samples (type t).
 * Stacks are interned in a table of this profile's own first, and only
 * the kept ones in the run's: a long run's memory holds the stacks its
 * pages show, not every stack it ever saw (2 million in a week of
 * 10,000-stack reports with churn). */
static int moment_samples(mpt_report_data *d, moment *m, const mpt_profile *p, size_t t,
                          const uint32_t *gname)
{
    mpt_intern local = {0};
    int rc = moment_samples_local(d, m, p, t, gname, &local);
    for (size_t i = 0; rc == 0 && i < m->nkept; i++) {
        size_t len;
        const void *key = mpt_intern_key(&local, m->kept[i].stack, &len);
        int64_t g = mpt_intern_put(&d->stacks, key, len);
        if (g < 0)
            rc = -2;
        else
            m->kept[i].stack = (uint32_t)g;
    }
    mpt_intern_free(&local);
    return rc;
}

/* The exact top table of moment m: its top_rows functions by flat. */
static int moment_top(mpt_report_data *d, moment *m, const mpt_profile *p, size_t t,
                      const uint32_t *gname)
{
    mpt_func_totals ft;
    if (mpt_func_totals_compute(p, t, &ft) != 0)
        return -2;
    m->top = malloc((p->nnames + 1) * sizeof *m->top);
    if (m->top == NULL) {
        mpt_func_totals_free(&ft);
        return -2;
    }
    size_t n = 0;
    for (size_t i = 0; i < p->nnames; i++)
        if (ft.flat[i] != 0 || ft.cum[i] != 0)
            m->top[n++] = (top_row){(uint32_t)i, ft.flat[i], ft.cum[i]};
    mpt_func_totals_free(&ft);
    /* Sorted as `mimprof top` sorts (by the file's own name order on ties),
     * then named by global id. */
    qsort(m->top, n, sizeof *m->top, top_by_flat);
    m->ntop = n < d->o.top_rows ? n : d->o.top_rows;
    m->top = shrink(m->top, m->ntop, sizeof *m->top);
    for (size_t i = 0; i < m->ntop; i++)
        m->top[i].name = gname[m->top[i].name];
    return 0;
}

int mpt_report_data_add(mpt_report_data *d, const mpt_profile *p, const char *file,
                        int64_t mtime_ns, char *err, size_t errlen)
{
    int t = mpt_profile_find_type(p, "inuse_space");
    if (t < 0) {
        snprintf(err, errlen, "no inuse_space in this profile (not a heap profile)");
        return -1;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 64;
        moment *nm = realloc(d->m, nc * sizeof *nm);
        if (nm == NULL)
            return -2;
        d->m = nm;
        d->cap = nc;
    }
    moment *m = &d->m[d->n];
    memset(m, 0, sizeof *m);
    m->kind = KIND_REPORT;
    /* A report's time_nanos is the start of its interval (what its
     * allocation samples cover) and its snapshot is taken at the end. */
    m->t_ns = p->time_nanos > 0
                  ? mpt_sat_add(p->time_nanos, p->duration_nanos > 0 ? p->duration_nanos : 0)
                  : mtime_ns;
    m->dur_ns = p->duration_nanos > 0 ? p->duration_nanos : 0;
    for (size_t i = 0; i < p->ncomments; i++) {
        const char *c = p->comments[i];
        int64_t pt = num_after(c, "peak: time_nanos=");
        if (strncmp(c, "peak: ", 6) == 0 && pt > 0) {
            m->kind = KIND_PEAK;
            m->t_ns = pt;
        }
        if (strncmp(c, "report-above: ", 14) == 0 && m->why == NULL) {
            m->kind = KIND_ABOVE;
            if ((m->why = strdup(c)) == NULL)
                return -2;
        }
    }
    mpt_report_mem_parse(p, &m->mem);
    int o = mpt_profile_find_type(p, "inuse_objects"), a = mpt_profile_find_type(p, "alloc_space");
    m->total = mpt_profile_total(p, (size_t)t);
    m->objects = o >= 0 ? mpt_profile_total(p, (size_t)o) : -1;
    m->alloc = a >= 0 ? mpt_profile_total(p, (size_t)a) : -1;
    uint32_t *gname = map_names(d, p);
    int rc = gname == NULL ? -2 : 0;
    if (rc == 0)
        rc = moment_samples(d, m, p, (size_t)t, gname);
    if (rc == 0)
        rc = moment_top(d, m, p, (size_t)t, gname);
    if (rc == 0 && (m->file = strdup(file)) == NULL)
        rc = -2;
    free(gname);
    if (rc != 0) {
        moment_free(m);
        return rc;
    }
    d->n++;
    return 0;
}
