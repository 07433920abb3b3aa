/* SPDX-License-Identifier: MIT */
/* The JSON document of `mimprof report` (report.h, mpt_report_data_write):
 * the moments in time order, the chosen sites, and the names and stacks
 * they refer to, renumbered densely. Safe inside <script>: no '<' is
 * written (names escape it). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report_data.h"

/* A JSON string: names are sanitized for display (control characters
 * and invalid UTF-8 become '?', as in every view), and '<', '>', '&' are
 * escaped so that the document can sit inside <script>. */
static void json_str(FILE *out, const char *s, size_t len)
{
    char raw[4096], shown[4 * 1000 + 3];
    if (len >= sizeof raw)
        len = sizeof raw - 1;
    memcpy(raw, s, len);
    raw[len] = '\0';
    mpt_display_name(raw, shown, sizeof shown, 1000);
    fputc('"', out);
    for (const char *c = shown; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c == '<' || *c == '>' || *c == '&')
            fprintf(out, "\\u%04x", (unsigned)*c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

static void json_cstr(FILE *out, const char *s) { json_str(out, s, strlen(s)); }

/* A stack or site (name ids) with its names renumbered by `names`. */
static void json_ids(FILE *out, const mpt_intern *t, size_t id, const uint32_t *names)
{
    size_t len;
    const uint32_t *k = mpt_intern_key(t, id, &len);
    fputc('[', out);
    for (size_t i = 0; i < len / sizeof *k; i++) {
        uint32_t v;
        memcpy(&v, &k[i], sizeof v);
        fprintf(out, i ? ",%" PRIu32 : "%" PRIu32, names[v]);
    }
    fputc(']', out);
}

/* The ids the page refers to, renumbered densely in first-use order:
 * only the stacks some moment keeps, and the names of those stacks, of
 * the chosen sites and of the top tables, are written (a long run
 * interns many more, its small stacks merged away). */
typedef struct used {
    uint32_t *map;  /* old id -> new id, UINT32_MAX = not used */
    uint32_t *list; /* new id -> old id */
    size_t n;
} used;

static int used_init(used *u, size_t n)
{
    u->map = malloc((n + 1) * sizeof *u->map);
    u->list = malloc((n + 1) * sizeof *u->list);
    u->n = 0;
    if (u->map == NULL || u->list == NULL)
        return -1;
    memset(u->map, 0xff, (n + 1) * sizeof *u->map);
    return 0;
}

static uint32_t used_mark(used *u, uint32_t id)
{
    if (u->map[id] == UINT32_MAX) {
        u->map[id] = (uint32_t)u->n;
        u->list[u->n++] = id;
    }
    return u->map[id];
}

static void used_names_of(used *names, const mpt_intern *t, size_t id)
{
    size_t len;
    const uint32_t *k = mpt_intern_key(t, id, &len);
    for (size_t i = 0; i < len / sizeof *k; i++) {
        uint32_t v;
        memcpy(&v, &k[i], sizeof v);
        used_mark(names, v);
    }
}

static int by_time(const void *a, const void *b)
{
    const moment *x = a, *y = b;
    if (x->t_ns != y->t_ns)
        return x->t_ns < y->t_ns ? -1 : 1;
    if (x->kind != y->kind) /* a report before a peak at the same time */
        return x->kind == KIND_REPORT ? -1 : (y->kind == KIND_REPORT ? 1 : x->kind - y->kind);
    return strcmp(x->file, y->file);
}

static int by_value_then_key(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* The chosen sites: the `sites` with the largest value at any moment;
 * *band[site id] = its band, or K for the rest. */
static int choose_sites(mpt_report_data *d, size_t **band, size_t *k, uint32_t **chosen)
{
    size_t ns = d->sites.n;
    pair *best = calloc(ns + 1, sizeof *best);
    *band = malloc((ns + 1) * sizeof **band);
    *chosen = malloc((ns + 1) * sizeof **chosen);
    if (best == NULL || *band == NULL || *chosen == NULL) {
        free(best);
        return -1;
    }
    for (size_t i = 0; i < ns; i++)
        best[i] = (pair){(int64_t)i, 0};
    for (size_t i = 0; i < d->n; i++)
        for (size_t s = 0; s < d->m[i].nsites; s++) {
            pair *b = &best[d->m[i].sites[s].key];
            if (d->m[i].sites[s].value > b->value)
                b->value = d->m[i].sites[s].value;
        }
    /* Largest first; ties by id (first seen). */
    qsort(best, ns, sizeof *best, by_value_then_key);
    *k = ns < d->o.sites ? ns : d->o.sites;
    for (size_t i = 0; i < ns; i++)
        (*band)[i] = *k;
    for (size_t i = 0; i < *k; i++) {
        (*band)[best[i].key] = i;
        (*chosen)[i] = (uint32_t)best[i].key;
    }
    free(best);
    return 0;
}

static void write_moment(FILE *out, const moment *m, const size_t *band, size_t k, int64_t *bands,
                         const used *stacks, const used *names)
{
    fputs("{\"f\":", out);
    json_cstr(out, m->file);
    fprintf(out,
            ",\"k\":\"%c\",\"t\":%" PRId64 ",\"dur\":%" PRId64 ",\"tot\":%" PRId64
            ",\"obj\":%" PRId64 ",\"alloc\":%" PRId64,
            m->kind, m->t_ns / 1000000, m->dur_ns / 1000000, m->total, m->objects, m->alloc);
    const mpt_report_mem *mm = &m->mem;
    fprintf(out, ",\"mem\":[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", mm->rss,
            mm->resident, mm->committed, mm->live, mm->profiler);
    json_cstr(out, mm->allocator);
    fputc(']', out);
    if (m->why != NULL) {
        fputs(",\"why\":", out);
        json_cstr(out, m->why);
    }
    /* The bands: chosen sites, then the rest = total - their sum (exact). */
    memset(bands, 0, (k + 1) * sizeof *bands);
    int64_t in_sites = 0;
    for (size_t s = 0; s < m->nsites; s++)
        if (band[m->sites[s].key] < k) {
            bands[band[m->sites[s].key]] = m->sites[s].value;
            in_sites = mpt_sat_add(in_sites, m->sites[s].value);
        }
    bands[k] = mpt_sat_sub(m->total, in_sites);
    fputs(",\"b\":[", out);
    for (size_t i = 0; i <= k; i++)
        fprintf(out, i ? ",%" PRId64 : "%" PRId64, bands[i]);
    fputs("],\"st\":[", out);
    for (size_t i = 0; i < m->nkept; i++)
        fprintf(out, "%s%" PRIu32 ",%" PRId64 ",%" PRId64, i ? "," : "",
                stacks->map[m->kept[i].stack], m->kept[i].age, m->kept[i].value);
    fprintf(out, "],\"oth\":%" PRId64 ",\"noth\":%zu,\"ages\":[", m->other, m->nother);
    for (size_t i = 0; i < m->nages; i++)
        fprintf(out, "%s%" PRId64 ",%" PRId64, i ? "," : "", m->ages[i].key, m->ages[i].value);
    fputs("],\"top\":[", out);
    for (size_t i = 0; i < m->ntop; i++)
        fprintf(out, "%s%" PRIu32 ",%" PRId64 ",%" PRId64, i ? "," : "", names->map[m->top[i].name],
                m->top[i].flat, m->top[i].cum);
    fputs("]}", out);
}

int mpt_report_data_write(mpt_report_data *d, FILE *out, const mpt_report_proc *procs,
                          size_t nprocs, size_t chosen)
{
    size_t *band = NULL, k = 0;
    uint32_t *sites = NULL;
    int64_t *bands = NULL;
    if (choose_sites(d, &band, &k, &sites) != 0 ||
        (bands = malloc((k + 1) * sizeof *bands)) == NULL) {
        free(band);
        free(sites);
        return -1;
    }
    qsort(d->m, d->n, sizeof *d->m, by_time);
    used us = {0}, un = {0};
    int rc = used_init(&us, d->stacks.n) == 0 && used_init(&un, d->names.n) == 0 ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < d->n; i++)
        for (size_t e = 0; e < d->m[i].nkept; e++)
            used_mark(&us, d->m[i].kept[e].stack);
    for (size_t i = 0; rc == 0 && i < us.n; i++)
        used_names_of(&un, &d->stacks, us.list[i]);
    for (size_t i = 0; rc == 0 && i < k; i++)
        used_names_of(&un, &d->sites, sites[i]);
    for (size_t i = 0; rc == 0 && i < d->n; i++)
        for (size_t r = 0; r < d->m[i].ntop; r++)
            used_mark(&un, d->m[i].top[r].name);
    if (rc != 0)
        goto out;
    fprintf(out, "{\"v\":1,\"program\":");
    json_cstr(out, nprocs > 0 ? procs[chosen].program : "");
    fprintf(out, ",\"pid\":%ld,\"processes\":[", nprocs > 0 ? procs[chosen].pid : 0L);
    for (size_t i = 0; i < nprocs; i++) {
        fprintf(out, "%s[%ld,", i ? "," : "", procs[i].pid);
        json_cstr(out, procs[i].program);
        fprintf(out, ",%zu,%" PRId64 "]", procs[i].nfiles, procs[i].max_bytes);
    }
    fprintf(out,
            "],\"opts\":{\"sites\":%zu,\"siteFrames\":%u,\"stacks\":%zu,\"topRows\":%zu},"
            "\"names\":[",
            d->o.sites, d->o.site_frames, d->o.stacks, d->o.top_rows);
    for (size_t i = 0; i < un.n; i++) {
        size_t len;
        const char *s = mpt_intern_key(&d->names, un.list[i], &len);
        if (i)
            fputc(',', out);
        json_str(out, s, len);
    }
    fputs("],\n\"stacks\":[", out);
    for (size_t i = 0; i < us.n; i++) {
        if (i)
            fputc(',', out);
        json_ids(out, &d->stacks, us.list[i], un.map);
    }
    fputs("],\n\"sites\":[", out);
    for (size_t i = 0; i < k; i++) {
        if (i)
            fputc(',', out);
        json_ids(out, &d->sites, sites[i], un.map);
    }
    fputs("],\n\"skipped\":[", out);
    for (size_t i = 0; i < d->nskip; i++) {
        fputs(i ? ",[" : "[", out);
        json_cstr(out, d->skip_file[i]);
        fputc(',', out);
        json_cstr(out, d->skip_why[i]);
        fputc(']', out);
    }
    fputs("],\n\"moments\":[\n", out);
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            fputs(",\n", out);
        write_moment(out, &d->m[i], band, k, bands, &us, &un);
    }
    fputs("]}\n", out);
    rc = ferror(out) ? -1 : 0;
out:
    free(us.map);
    free(us.list);
    free(un.map);
    free(un.list);
    free(band);
    free(sites);
    free(bands);
    return rc;
}
