/* SPDX-License-Identifier: MIT */
/* mimprof top: a terminal table of the top functions, flat and cumulative,
 * like `pprof -top`. */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ages.h"
#include "report.h"
#include "units.h"
#include "views.h"

typedef struct row {
    uint32_t name;
    int64_t flat, cum;
} row;

static int by_flat(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->flat != y->flat)
        return x->flat > y->flat ? -1 : 1;
    if (x->cum != y->cum)
        return x->cum > y->cum ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static int by_cum(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->cum != y->cum)
        return x->cum > y->cum ? -1 : 1;
    if (x->flat != y->flat)
        return x->flat > y->flat ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static double pct(int64_t v, int64_t total)
{
    return total != 0 ? 100.0 * (double)v / (double)total : 0.0;
}

/* Whether a comment is one of the terms recomputed here (the producer
 * writes them signed: S < 0 when the estimate exceeds the resident
 * figure; profiling/src/reconcile.c). */
static bool recomputed(const char *c)
{
    return strncmp(c, "memory unexplained:", 19) == 0 ||
           strncmp(c, "memory unexplained =", 20) == 0 ||
           strncmp(c, "memory allocator slack below zero", 33) == 0;
}

/* The reconciliation's terms, every one >= 0 (as the page draws them):
 * where the estimated live heap L and the profiler P exceed the
 * resident figure (the allocator's A, else RSS R), the excess is said
 * with the estimate's tolerance instead of a negative term. The
 * estimate's standard deviation is at most sqrt(L x interval) (blocks of
 * S bytes sampled at interval I: S sqrt(n (1-p)/p) with (1-p)/p <= I/S;
 * profiling/README.md, "Accuracy"). */
static void print_terms(FILE *out, const mpt_profile *p, const mpt_report_mem *m)
{
    if (m->rss < 0 || m->live < 0 || m->profiler < 0)
        return;
    int64_t lp = mpt_sat_add(m->live, m->profiler);
    bool split = m->resident >= 0;
    int64_t a = split && m->resident < m->rss ? m->resident : m->rss;
    int64_t over = lp > a ? lp - a : 0;
    double sd = p->period > 0 ? sqrt((double)m->live * (double)p->period) : 0;
    if (over == 0)
        fprintf(out, "memory unexplained: %lld bytes = rss - live heap - profiler\n",
                (long long)(m->rss - lp));
    else
        fprintf(out,
                "memory unexplained: %lld bytes%s (the estimated live heap and the profiler "
                "exceed %s by %lld bytes: the estimate's standard deviation is at most %.0f "
                "bytes, sqrt(live heap x sampling interval %lld), and blocks not written yet are "
                "not resident)\n",
                (long long)(m->rss - a), split ? " = rss - allocator resident" : "",
                split ? "the allocator's resident bytes" : "rss", (long long)over, sd,
                (long long)p->period);
    if (split)
        fprintf(out,
                "memory unexplained = allocator slack %lld (allocator resident - live heap - "
                "profiler%s) + outside the allocator %lld (rss - allocator resident)\n",
                (long long)(a - lp + over), over > 0 ? ", at least 0" : "",
                (long long)(m->rss - a));
}

/* The head of a mimprof report's memory reconciliation (its comments
 * that start with "memory"), before the table. */
static void print_memory_head(FILE *out, const mpt_profile *p)
{
    char line[4 * 400 + 3]; /* 400 characters of up to 4 bytes, "..", NUL */
    mpt_report_mem m;
    mpt_report_mem_parse(p, &m);
    bool terms = false;
    for (size_t i = 0; i < p->ncomments; i++) {
        const char *c = p->comments[i];
        if (strncmp(c, "memory ", 7) != 0)
            continue;
        if (recomputed(c) && m.rss >= 0 && m.live >= 0 && m.profiler >= 0) {
            if (!terms)
                print_terms(out, p, &m);
            terms = true;
            continue;
        }
        fprintf(out, "%s\n", mpt_display_name(c, line, sizeof line, 400));
    }
}

int mpt_top_print(FILE *out, const mpt_profile *p, size_t t, size_t n, bool cum_order, bool ages)
{
    mpt_func_totals ft;
    int64_t *age = NULL;
    if (mpt_func_totals_compute(p, t, &ft) != 0)
        return -1;
    row *rows = malloc((p->nnames + 1) * sizeof *rows);
    if (rows == NULL || (ages && mpt_func_median_age(p, t, &age) != 0)) {
        free(rows);
        mpt_func_totals_free(&ft);
        return -1;
    }
    size_t nrows = 0;
    for (size_t i = 0; i < p->nnames; i++)
        if (ft.flat[i] != 0 || ft.cum[i] != 0)
            rows[nrows++] = (row){(uint32_t)i, ft.flat[i], ft.cum[i]};
    mpt_func_totals_free(&ft);
    qsort(rows, nrows, sizeof *rows, cum_order ? by_cum : by_flat);

    const char *unit = p->type_unit[t];
    int64_t total = mpt_profile_total(p, t);
    size_t shown = n == 0 || n > nrows ? nrows : n;
    char tn[96], un[64], tot[64];
    mpt_format_value(tot, sizeof tot, (double)total, unit);
    print_memory_head(out, p);
    fprintf(out, "Type: %s (%s)\n", mpt_display_name(p->type_name[t], tn, sizeof tn, 60),
            mpt_display_name(unit, un, sizeof un, 40));
    fprintf(out, "Total: %s in %zu samples; showing top %zu of %zu functions%s\n", tot, p->nsamples,
            shown, nrows, cum_order ? ", by cum" : "");
    if (p->nsamples == 0)
        fputs("Empty: no samples. A program whose allocations bypass malloc (its allocator "
              "linked in: Rust #[global_allocator], tcmalloc or jemalloc) leaves its profile "
              "empty under mimprof run; profile a Rust one with the mimprof crate. Else the "
              "program allocated less than the sampling interval (-i), or freed everything "
              "(inuse types).\n",
              out);
    if (ages)
        fprintf(out, "%10s %7s %7s %10s %7s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
                "age", "function");
    else
        fprintf(out, "%10s %7s %7s %10s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
                "function");
    int64_t sum = 0;
    for (size_t i = 0; i < shown; i++) {
        char fv[32], cv[32], name[1024];
        sum = mpt_sat_add(sum, rows[i].flat);
        mpt_format_value(fv, sizeof fv, (double)rows[i].flat, unit);
        mpt_format_value(cv, sizeof cv, (double)rows[i].cum, unit);
        fprintf(out, "%10s %6.2f%% %6.2f%% %10s %6.2f%%", fv, pct(rows[i].flat, total),
                pct(sum, total), cv, pct(rows[i].cum, total));
        if (ages) {
            char av[32];
            mpt_format_age(av, sizeof av, age[rows[i].name]);
            fprintf(out, " %7s", av);
        }
        fprintf(out, "  %s\n", mpt_display_name(p->names[rows[i].name], name, sizeof name, 200));
    }
    free(rows);
    free(age);
    return ferror(out) ? -1 : 0;
}

int mpt_parse_age_opt(const char *cmd, int c, const char *arg, mpt_limits *lim)
{
    int64_t ns;
    if (!mpt_parse_age(arg, &ns)) {
        fprintf(stderr, "mimprof %s: --%s wants a duration (10s, 10m, 1h), not '%s'\n", cmd,
                c == MPT_OPT_OLDER ? "older-than" : "younger-than", arg);
        return MPT_EXIT_USAGE;
    }
    if (c == MPT_OPT_OLDER)
        lim->older_than_ns = ns;
    else
        lim->younger_than_ns = ns;
    return -1;
}

int mpt_parse_table_opts(const char *cmd, int argc, char **argv, const char **type, size_t *n,
                         bool *cum, bool *ages, mpt_limits *lim)
{
    static const struct option longopts[] = {
        {"type", required_argument, NULL, 't'},
        {"cum", no_argument, NULL, 'c'},
        {"older-than", required_argument, NULL, MPT_OPT_OLDER},
        {"younger-than", required_argument, NULL, MPT_OPT_YOUNGER},
        {"age", no_argument, NULL, 'A'},
        {"no-demangle", no_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:n:ch", longopts, NULL)) != -1) {
        switch (c) {
        case 't':
            *type = optarg;
            break;
        case 'n': {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || optarg[0] == '-') {
                fprintf(stderr, "mimprof %s: -n wants a number, not '%s'\n", cmd, optarg);
                return MPT_EXIT_USAGE;
            }
            *n = (size_t)v;
            break;
        }
        case 'c':
            *cum = true;
            break;
        case MPT_OPT_OLDER:
        case MPT_OPT_YOUNGER: {
            int rc = mpt_parse_age_opt(cmd, c, optarg, lim);
            if (rc >= 0)
                return rc;
            break;
        }
        case 'A':
            if (ages == NULL) {
                fprintf(stderr, "mimprof %s: unknown option '--age' (see mimprof %s --help)\n", cmd,
                        cmd);
                return MPT_EXIT_USAGE;
            }
            *ages = true;
            break;
        case 'D':
            lim->raw_names = true;
            break;
        case 'h':
            mpt_usage(stdout, cmd);
            return MPT_EXIT_OK;
        default: /* ':' (an option without its value) or an unknown one */
            mpt_usage_bad_option(cmd, c, argv[optind - 1]);
            return MPT_EXIT_USAGE;
        }
    }
    return -1;
}

int mpt_cmd_top(int argc, char **argv)
{
    const char *type = NULL;
    size_t n = 20;
    bool cum = false, ages = false;
    mpt_limits lim;
    mpt_limits_init(&lim);
    int rc_opts = mpt_parse_table_opts("top", argc, argv, &type, &n, &cum, &ages, &lim);
    if (rc_opts >= 0)
        return rc_opts;
    if (argc - optind != 1) {
        fprintf(stderr, "mimprof top: want exactly one FILE (see mimprof top --help)\n");
        return MPT_EXIT_USAGE;
    }
    char err[640];
    mpt_profile *p;
    if (mpt_profile_load(argv[optind], &lim, &p, err, sizeof err) != 0) {
        fprintf(stderr, "mimprof top: %s\n", err);
        return MPT_EXIT_FAIL;
    }
    int t = mpt_profile_pick_type(p, type, err, sizeof err);
    int rc = MPT_EXIT_OK;
    if (t < 0) {
        fprintf(stderr, "mimprof top: %s\n", err);
        rc = MPT_EXIT_FAIL;
    } else if (mpt_top_print(stdout, p, (size_t)t, n, cum, ages) != 0) {
        fprintf(stderr, "mimprof top: out of memory or write error\n");
        rc = MPT_EXIT_FAIL;
    }
    mpt_profile_free(p);
    return rc;
}
