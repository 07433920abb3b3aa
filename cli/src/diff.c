/* SPDX-License-Identifier: MIT */
/* mimprof diff: what grew and shrank per function between two profiles
 * (matched by function name), the leak hunter's view. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"
#include "views.h"

typedef struct drow {
    const char *name;
    int64_t base_flat, base_cum, new_flat, new_cum;
} drow;

typedef struct named {
    const char *name;
    int64_t flat, cum;
} named;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static int64_t dflat(const drow *r) { return mpt_sat_sub(r->new_flat, r->base_flat); }
static int64_t dcum(const drow *r) { return mpt_sat_sub(r->new_cum, r->base_cum); }

/* Largest growth first; ties by the other delta, then name. */
static int growth_cmp(const drow *x, const drow *y, bool cum)
{
    int64_t kx = cum ? dcum(x) : dflat(x), ky = cum ? dcum(y) : dflat(y);
    if (kx != ky)
        return kx > ky ? -1 : 1;
    int64_t ox = cum ? dflat(x) : dcum(x), oy = cum ? dflat(y) : dcum(y);
    if (ox != oy)
        return ox > oy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_flat_growth(const void *a, const void *b) { return growth_cmp(a, b, false); }
static int by_cum_growth(const void *a, const void *b) { return growth_cmp(a, b, true); }

/* Per-function totals of one profile, sorted by name. */
static named *collect(const mpt_profile *p, size_t t, size_t *n)
{
    mpt_func_totals ft;
    if (mpt_func_totals_compute(p, t, &ft) != 0)
        return NULL;
    named *v = malloc((p->nnames + 1) * sizeof *v);
    if (v != NULL) {
        for (size_t i = 0; i < p->nnames; i++)
            v[i] = (named){p->names[i], ft.flat[i], ft.cum[i]};
        qsort(v, p->nnames, sizeof *v, by_name);
        *n = p->nnames;
    }
    mpt_func_totals_free(&ft);
    return v;
}

static void print_rows(FILE *out, const drow *rows, size_t count, size_t n, const char *unit,
                       const char *title)
{
    size_t shown = n == 0 || n > count ? count : n;
    fprintf(out, "%s (%zu of %zu functions):\n", title, shown, count);
    if (count == 0)
        return;
    fprintf(out, "%11s %11s %10s %10s  %s\n", "flat delta", "cum delta", "base flat", "new flat",
            "function");
    for (size_t i = 0; i < shown; i++) {
        const drow *r = &rows[i];
        char df[40], dc[40], bf[32], nf[32], name[1024];
        int64_t a = dflat(r), c = dcum(r);
        mpt_format_value(df + 1, sizeof df - 1, (double)a, unit);
        df[0] = a > 0 ? '+' : ' ';
        mpt_format_value(dc + 1, sizeof dc - 1, (double)c, unit);
        dc[0] = c > 0 ? '+' : ' ';
        mpt_format_value(bf, sizeof bf, (double)r->base_flat, unit);
        mpt_format_value(nf, sizeof nf, (double)r->new_flat, unit);
        fprintf(out, "%11s %11s %10s %10s  %s\n", df[0] == ' ' ? df + 1 : df,
                dc[0] == ' ' ? dc + 1 : dc, bf, nf,
                mpt_display_name(r->name, name, sizeof name, 200));
    }
}

int mpt_diff_print(FILE *out, const mpt_profile *base, const mpt_profile *cur, const char *type,
                   size_t n, bool by_cum, char *err, size_t errlen)
{
    int tb, tn;
    if (type == NULL && mpt_profile_find_type(base, "inuse_space") >= 0 &&
        mpt_profile_find_type(cur, "inuse_space") >= 0)
        type = "inuse_space";
    if (type == NULL) {
        if ((tn = mpt_profile_pick_type(cur, NULL, err, errlen)) < 0)
            return -1;
        type = cur->type_name[tn];
    }
    if ((tb = mpt_profile_pick_type(base, type, err, errlen)) < 0 ||
        (tn = mpt_profile_pick_type(cur, type, err, errlen)) < 0)
        return -1;
    const char *unit = cur->type_unit[tn];
    if (strcmp(base->type_unit[tb], unit) != 0) {
        char u1[64], u2[64];
        snprintf(err, errlen, "the profiles measure %s in different units (%s, %s)", type,
                 mpt_display_name(base->type_unit[tb], u1, sizeof u1, 40),
                 mpt_display_name(unit, u2, sizeof u2, 40));
        return -1;
    }
    size_t na = 0, nb = 0;
    named *a = collect(base, (size_t)tb, &na);
    named *b = a != NULL ? collect(cur, (size_t)tn, &nb) : NULL;
    drow *rows = b != NULL ? malloc((na + nb + 1) * sizeof *rows) : NULL;
    if (rows == NULL) {
        free(a);
        free(b);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Merge the two name-sorted lists. */
    size_t i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(a[i].name, b[j].name);
        drow r = {0};
        if (c <= 0) {
            r.name = a[i].name;
            r.base_flat = a[i].flat;
            r.base_cum = a[i].cum;
            i++;
        }
        if (c >= 0) {
            r.name = b[j].name;
            r.new_flat = b[j].flat;
            r.new_cum = b[j].cum;
            j++;
        }
        if (dflat(&r) != 0 || dcum(&r) != 0)
            rows[k++] = r;
    }
    qsort(rows, k, sizeof *rows, by_cum ? by_cum_growth : by_flat_growth);
    size_t grew = 0;
    while (grew < k && (by_cum ? dcum(&rows[grew]) : dflat(&rows[grew])) > 0)
        grew++;
    /* Shrank: from the end (largest decrease first). */
    size_t first_shrunk = grew;
    while (first_shrunk < k &&
           (by_cum ? dcum(&rows[first_shrunk]) : dflat(&rows[first_shrunk])) == 0)
        first_shrunk++;
    size_t nshrunk = k - first_shrunk;
    for (size_t x = 0; x < nshrunk / 2; x++) {
        drow tmp = rows[first_shrunk + x];
        rows[first_shrunk + x] = rows[k - 1 - x];
        rows[k - 1 - x] = tmp;
    }

    int64_t ta = mpt_profile_total(base, (size_t)tb), tc = mpt_profile_total(cur, (size_t)tn);
    char s1[32], s2[32], s3[40], tname[96], uname[64];
    mpt_format_value(s1, sizeof s1, (double)ta, unit);
    mpt_format_value(s2, sizeof s2, (double)tc, unit);
    int64_t td = mpt_sat_sub(tc, ta);
    mpt_format_value(s3 + 1, sizeof s3 - 1, (double)td, unit);
    s3[0] = td > 0 ? '+' : ' ';
    fprintf(out, "Type: %s (%s)\n", mpt_display_name(type, tname, sizeof tname, 60),
            mpt_display_name(unit, uname, sizeof uname, 40));
    fprintf(out, "Total: %s -> %s (%s)\n", s1, s2, s3[0] == ' ' ? s3 + 1 : s3);
    const char *key = by_cum ? "cum" : "flat";
    char title[64];
    snprintf(title, sizeof title, "Grew, by %s delta", key);
    print_rows(out, rows, grew, n, unit, title);
    snprintf(title, sizeof title, "Shrank, by %s delta", key);
    print_rows(out, rows + first_shrunk, nshrunk, n, unit, title);
    free(rows);
    free(a);
    free(b);
    if (ferror(out)) {
        snprintf(err, errlen, "write error");
        return -1;
    }
    return 0;
}

int mpt_cmd_diff(int argc, char **argv)
{
    const char *type = NULL;
    size_t n = 20;
    bool cum = false;
    mpt_limits lim;
    mpt_limits_init(&lim);
    int rc_opts = mpt_parse_table_opts("diff", argc, argv, &type, &n, &cum, NULL, &lim);
    if (rc_opts >= 0)
        return rc_opts;
    if (argc - optind != 2) {
        fprintf(stderr, "mimprof diff: want BASE and NEW files (see mimprof diff --help)\n");
        return MPT_EXIT_USAGE;
    }
    char err[640];
    mpt_profile *a = NULL, *b = NULL;
    int rc = MPT_EXIT_FAIL;
    if (mpt_profile_load(argv[optind], &lim, &a, err, sizeof err) != 0 ||
        mpt_profile_load(argv[optind + 1], &lim, &b, err, sizeof err) != 0)
        fprintf(stderr, "mimprof diff: %s\n", err);
    else if (mpt_diff_print(stdout, a, b, type, n, cum, err, sizeof err) != 0)
        fprintf(stderr, "mimprof diff: %s\n", err);
    else
        rc = MPT_EXIT_OK;
    mpt_profile_free(a);
    mpt_profile_free(b);
    return rc;
}
