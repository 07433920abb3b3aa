/* SPDX-License-Identifier: MIT */
/* mimprof report: the inputs (directories and files), the processes they
 * hold (by the file names heap.<pid>.<seq>[.peak].pb.gz), the choice of
 * one (--pid, --program, else the one with the most memory), and the
 * page written next to its target and renamed (never half a page). A
 * file that cannot be read is skipped, said on stderr and named on the
 * page; the page is written from the others. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"
#include "views.h"

typedef struct input {
    char *path;
    long pid; /* from the name; 0 when it does not say */
    int64_t mtime_ns;
    char *err; /* why it could not be read (malloc()ed), or NULL: not tried or read */
} input;

typedef struct inputs {
    input *v;
    size_t n, cap;
} inputs;

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The pseudo-pid of the service's windows, service.<end_ms>[.peak].pb.gz:
 * the reports of every process of a tree merged per window by the
 * collector (collector_windows.c). */
#define SERVICE_PID (-1L)

/* The pid of a name "heap.<pid>.<seq>..." (a base name), SERVICE_PID for
 * "service.<end_ms>...", else 0. */
static long name_pid(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strncmp(base, "service.", 8) == 0 && base[8] >= '0' && base[8] <= '9')
        return SERVICE_PID;
    if (strncmp(base, "heap.", 5) != 0)
        return 0;
    char *end;
    long pid = strtol(base + 5, &end, 10);
    return end != base + 5 && *end == '.' && pid > 0 ? pid : 0;
}

static int add_input(inputs *in, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (in->n == in->cap) {
        size_t nc = in->cap ? in->cap * 2 : 64;
        input *nv = realloc(in->v, nc * sizeof *nv);
        if (nv == NULL)
            return -2;
        in->v = nv;
        in->cap = nc;
    }
    char *p = strdup(path);
    if (p == NULL)
        return -2;
    in->v[in->n++] = (input){p, name_pid(path),
                             (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, NULL};
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's pprof files (*.pb.gz, *.pb) modified since since_ns, in
 * name order. */
static int add_dir(inputs *in, const char *dir, int64_t since_ns)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!has_suffix(e->d_name, ".pb.gz") && !has_suffix(e->d_name, ".pb"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (nn == NULL) {
                rc = -2;
                break;
            }
            names = nn;
        }
        if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0)
            rc = -2;
        else
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode) &&
            (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec >= since_ns &&
            add_input(in, names[i]) == -2)
            rc = -2;
        free(names[i]);
    }
    free(names);
    return rc;
}

/* The processes of the inputs; with more than one named, each file is
 * read once to learn its program and its memory. */
static int find_procs(inputs *in, const mpt_limits *lim, mpt_report_proc **out, size_t *nout)
{
    mpt_report_proc *v = calloc(in->n + 1, sizeof *v);
    if (v == NULL)
        return -2;
    size_t n = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t j = 0;
        while (j < n && v[j].pid != in->v[i].pid)
            j++;
        if (j == n)
            v[n++] = (mpt_report_proc){.pid = in->v[i].pid, .max_bytes = -1};
        v[j].nfiles++;
    }
    /* Files that do not name a process go with the one chosen: they are
     * a process of their own only when no file names one. */
    if (n > 1)
        for (size_t j = 0; j < n; j++)
            if (v[j].pid == 0) {
                v[j] = v[--n];
                break;
            }
    for (size_t i = 0; n > 1 && i < in->n; i++) {
        mpt_profile *p;
        char err[640];
        if (in->v[i].pid == 0)
            continue;
        if (mpt_profile_load(in->v[i].path, lim, &p, err, sizeof err) != 0) {
            /* named on the page and on stderr whichever process is shown */
            in->v[i].err = strdup(err);
            if (in->v[i].err == NULL)
                return free(v), -2;
            continue;
        }
        size_t j = 0;
        while (v[j].pid != in->v[i].pid)
            j++;
        mpt_report_mem mem;
        mpt_report_mem_parse(p, &mem);
        int t = mpt_profile_find_type(p, "inuse_space");
        int64_t bytes = mem.rss >= 0 ? mem.rss : (t >= 0 ? mpt_profile_total(p, (size_t)t) : -1);
        if (bytes > v[j].max_bytes)
            v[j].max_bytes = bytes;
        if (v[j].program[0] == '\0')
            snprintf(v[j].program, sizeof v[j].program, "%s",
                     v[j].pid == SERVICE_PID ? "the service: all its processes" : p->program);
        mpt_profile_free(p);
    }
    *out = v;
    *nout = n;
    return 0;
}

/* The chosen process: by pid, by program, else the service (a tree's
 * windows, when the input holds them), else the most memory. */
static int choose(const mpt_report_proc *v, size_t n, long pid, const char *program, size_t *out)
{
    size_t best = 0;
    for (size_t j = 0; j < n; j++) {
        if ((pid > 0 && v[j].pid == pid) ||
            (program != NULL && strcmp(v[j].program, program) == 0)) {
            *out = j;
            return 0;
        }
        if (v[best].pid != SERVICE_PID &&
            (v[j].pid == SERVICE_PID || v[j].max_bytes > v[best].max_bytes))
            best = j;
    }
    if (pid > 0 || program != NULL)
        return -1;
    *out = best;
    return 0;
}

/* Reads the chosen process's files into d (and the files that name no
 * process); a file that fails, of any process, is skipped and named. The
 * count used. */
static size_t load_moments(mpt_report_data *d, const inputs *in, const mpt_limits *lim, long pid,
                           mpt_report_proc *proc, bool quiet)
{
    size_t used = 0;
    for (size_t i = 0; i < in->n; i++) {
        bool failed = in->v[i].err != NULL; /* already tried (find_procs) */
        if (in->v[i].pid != pid && in->v[i].pid != 0 && !failed)
            continue;
        const char *path = in->v[i].path, *base = strrchr(path, '/');
        base = base != NULL ? base + 1 : path;
        mpt_profile *p = NULL;
        char err[640];
        int rc = failed ? -1 : mpt_profile_load(path, lim, &p, err, sizeof err);
        if (failed)
            snprintf(err, sizeof err, "%s", in->v[i].err);
        if (rc == 0)
            rc = mpt_report_data_add(d, p, base, in->v[i].mtime_ns, err, sizeof err);
        if (rc == 0) {
            used++;
            if (proc->program[0] == '\0')
                snprintf(proc->program, sizeof proc->program, "%s",
                         pid == SERVICE_PID ? "the service: all its processes" : p->program);
        } else if (rc == -2 || mpt_report_data_skip(d, base, err) != 0) {
            snprintf(err, sizeof err, "out of memory");
        }
        if (rc != 0 && !quiet)
            fprintf(stderr, "mimprof report: skipped %s: %s\n", path, err);
        mpt_profile_free(p);
    }
    return used;
}

/* The page into `path` through a temporary file renamed over it. */
static int write_page(const char *path, mpt_report_data *d, const mpt_report_proc *procs,
                      size_t nprocs, size_t chosen)
{
    char *json = NULL, *tmp = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    if (mem == NULL)
        return -1;
    int rc = mpt_report_data_write(d, mem, procs, nprocs, chosen);
    if (fclose(mem) != 0)
        rc = -1;
    if (rc == 0 && asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
        rc = -1, tmp = NULL;
    FILE *out = rc == 0 ? fopen(tmp, "w") : NULL;
    if (out == NULL)
        rc = -1;
    else {
        rc = mpt_report_html_write(out, json, len);
        if (fclose(out) != 0)
            rc = -1;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            remove(tmp);
    }
    free(tmp);
    free(json);
    return rc;
}

typedef struct run_opts {
    mpt_report_opts ro;
    mpt_limits lim;
    long pid;
    const char *program;
    const char *out;
    bool quiet;
} run_opts;

static int report(const run_opts *o, inputs *in)
{
    mpt_report_proc *procs = NULL;
    size_t nprocs = 0, chosen = 0;
    if (find_procs(in, &o->lim, &procs, &nprocs) != 0) {
        fprintf(stderr, "mimprof report: out of memory\n");
        return MPT_EXIT_FAIL;
    }
    if (nprocs == 0) {
        fprintf(stderr, "mimprof report: no pprof files (*.pb.gz, *.pb) in the input\n");
        free(procs);
        return MPT_EXIT_FAIL;
    }
    if (choose(procs, nprocs, o->pid, o->program, &chosen) != 0) {
        fprintf(stderr, "mimprof report: no process %s%s in the input; it holds:",
                o->program ? "named " : "", o->program ? o->program : "with that pid");
        for (size_t j = 0; j < nprocs; j++)
            fprintf(stderr, " %ld (%s)", procs[j].pid, procs[j].program);
        fputc('\n', stderr);
        free(procs);
        return MPT_EXIT_USAGE;
    }
    mpt_report_data *d = mpt_report_data_new(&o->ro);
    int rc = MPT_EXIT_OK;
    size_t used =
        d != NULL ? load_moments(d, in, &o->lim, procs[chosen].pid, &procs[chosen], o->quiet) : 0;
    if (d == NULL) {
        fprintf(stderr, "mimprof report: out of memory\n");
        rc = MPT_EXIT_FAIL;
    } else if (used == 0) {
        fprintf(stderr, "mimprof report: no readable heap profile in the input\n");
        rc = MPT_EXIT_FAIL;
    } else if (write_page(o->out, d, procs, nprocs, chosen) != 0) {
        fprintf(stderr, "mimprof report: cannot write %s: %s\n", o->out, strerror(errno));
        rc = MPT_EXIT_FAIL;
    } else if (!o->quiet) {
        if (procs[chosen].pid == SERVICE_PID)
            fprintf(stderr,
                    "mimprof report: wrote %s (%zu windows of the service, all its processes "
                    "merged; one process: see --pid)\n",
                    o->out, used);
        else
            fprintf(stderr, "mimprof report: wrote %s (%zu profiles of pid %ld%s%s%s)\n", o->out,
                    used, procs[chosen].pid, procs[chosen].program[0] ? ", " : "",
                    procs[chosen].program, nprocs > 1 ? "; other processes: see --pid" : "");
    }
    mpt_report_data_free(d);
    free(procs);
    return rc;
}

static void inputs_free(inputs *in)
{
    for (size_t i = 0; i < in->n; i++) {
        free(in->v[i].path);
        free(in->v[i].err);
    }
    free(in->v);
}

int mpt_report_dir_page(const char *dir, int64_t since_ns, const char *out)
{
    run_opts o = {.out = out, .quiet = true};
    mpt_report_opts_init(&o.ro);
    mpt_limits_init(&o.lim);
    inputs in = {0};
    int rc = add_dir(&in, dir, since_ns) == 0 ? report(&o, &in) : MPT_EXIT_FAIL;
    inputs_free(&in);
    return rc == MPT_EXIT_OK ? 0 : -1;
}

static int parse_size(const char *opt, const char *arg, size_t lo, size_t hi, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || arg[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "mimprof report: %s wants %zu..%zu, not '%s'\n", opt, lo, hi, arg);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

int mpt_cmd_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"pid", required_argument, NULL, 'p'},
        {"program", required_argument, NULL, 'P'},
        {"sites", required_argument, NULL, 'S'},
        {"site-frames", required_argument, NULL, 'F'},
        {"stacks", required_argument, NULL, 'K'},
        {"top", required_argument, NULL, 'T'},
        {"no-demangle", no_argument, NULL, 'D'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    run_opts o = {.out = "report.html"};
    mpt_report_opts_init(&o.ro);
    mpt_limits_init(&o.lim);
    int c;
    size_t v;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            o.out = optarg;
            break;
        case 'p':
            if (parse_size("--pid", optarg, 1, 0x7fffffff, &v) != 0)
                return MPT_EXIT_USAGE;
            o.pid = (long)v;
            break;
        case 'P':
            o.program = optarg;
            break;
        case 'S':
            if (parse_size("--sites", optarg, 1, 1000, &o.ro.sites) != 0)
                return MPT_EXIT_USAGE;
            break;
        case 'F':
            if (parse_size("--site-frames", optarg, 1, 64, &v) != 0)
                return MPT_EXIT_USAGE;
            o.ro.site_frames = (unsigned)v;
            break;
        case 'K':
            if (parse_size("--stacks", optarg, 1, 1000000, &o.ro.stacks) != 0)
                return MPT_EXIT_USAGE;
            break;
        case 'T':
            if (parse_size("--top", optarg, 1, 100000, &o.ro.top_rows) != 0)
                return MPT_EXIT_USAGE;
            break;
        case 'D':
            o.lim.raw_names = true;
            break;
        case 'q':
            o.quiet = true;
            break;
        case 'h':
            mpt_usage(stdout, "report");
            return MPT_EXIT_OK;
        default: /* ':' (an option without its value) or an unknown one */
            mpt_usage_bad_option("report", c, argv[optind - 1]);
            return MPT_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "mimprof report: want DIR or FILES (see mimprof report --help)\n");
        return MPT_EXIT_USAGE;
    }
    inputs in = {0};
    for (int i = optind; i < argc; i++) {
        struct stat st;
        int rc = stat(argv[i], &st) != 0 ? -1
                 : S_ISDIR(st.st_mode)   ? add_dir(&in, argv[i], INT64_MIN)
                                         : add_input(&in, argv[i]);
        if (rc != 0) {
            fprintf(stderr, "mimprof report: %s: %s\n", argv[i],
                    rc == -2 ? "out of memory" : strerror(errno));
            inputs_free(&in);
            return MPT_EXIT_FAIL;
        }
    }
    int rc = report(&o, &in);
    inputs_free(&in);
    return rc;
}
