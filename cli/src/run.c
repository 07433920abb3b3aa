/* SPDX-License-Identifier: MIT */
/* mimprof run's command line: parses and checks the options, then runs
 * the command with them (run_exec.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

#include "collector.h"
#include "report.h"
#include "run.h"
#include "units.h"
#include "views.h"

/* Hides a secret given on the command line from ps (/proc/PID/cmdline
 * shows this process's argv memory) once it has been copied. */
static void blank(char *s) { memset(s, 'x', strlen(s)); }

static int parse_flag_value(const char *name, const char *v, const char *const *allowed)
{
    for (int i = 0; allowed[i] != NULL; i++)
        if (strcmp(v, allowed[i]) == 0)
            return i;
    fprintf(stderr, "mimprof run: %s wants one of", name);
    for (int i = 0; allowed[i] != NULL; i++)
        fprintf(stderr, "%s %s", i ? "," : "", allowed[i]);
    fprintf(stderr, ", not '%s'\n", v);
    return -1;
}

/* --report-page: the page of this run's reports (files written since
 * it started), next to them as DIR/report.html. */
static void run_report_page(const run_opts *o, int64_t since_ns)
{
    char *page = NULL;
    if (asprintf(&page, "%s/report.html", o->out_dir) < 0)
        return;
    if (mpt_report_dir_page(o->out_dir, since_ns, page) == 0 && !o->quiet)
        fprintf(stderr, "mimprof run: report page %s\n", page);
    else if (!o->quiet)
        fprintf(stderr, "mimprof run: no report page written (no readable report in %s)\n",
                o->out_dir);
    free(page);
}

int mpt_cmd_run(int argc, char **argv)
{
    enum {
        O_FF = 256,
        O_NFF,
        O_FE,
        O_NFE,
        O_SEED,
        O_DEPTH,
        O_PYRO,
        O_APP,
        O_TAG,
        O_TENANT,
        O_BASIC,
        O_BEARER,
        O_PROTO,
        O_IMG_EXIT,
        O_IMG_EVERY,
        O_ABOVE,
        O_IMG_DIR,
        O_DORMANT,
        O_HTTP,
        O_HTTP_WILDCARD,
        O_REPORT_PAGE,
        O_KEEP,
        O_KEEP_SIZE,
        O_NO_COLLECTOR,
        O_DROP,
        O_KEEP_ALLOC,
        O_INSTANCE
    };
    static const struct option longopts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"allocator", required_argument, NULL, 'a'},
        {"every", required_argument, NULL, 'e'},
        {"output", required_argument, NULL, 'o'},
        {"symbolize", required_argument, NULL, 's'},
        {"follow-fork", no_argument, NULL, O_FF},
        {"no-follow-fork", no_argument, NULL, O_NFF},
        {"follow-exec", no_argument, NULL, O_FE},
        {"no-follow-exec", no_argument, NULL, O_NFE},
        {"seed", required_argument, NULL, O_SEED},
        {"max-depth", required_argument, NULL, O_DEPTH},
        {"quiet", no_argument, NULL, 'q'},
        {"pyroscope", required_argument, NULL, O_PYRO},
        {"app", required_argument, NULL, O_APP},
        {"tag", required_argument, NULL, O_TAG},
        {"tenant", required_argument, NULL, O_TENANT},
        {"basic-auth", required_argument, NULL, O_BASIC},
        {"bearer-token", required_argument, NULL, O_BEARER},
        {"pyroscope-protocol", required_argument, NULL, O_PROTO},
        {"image-on-exit", no_argument, NULL, O_IMG_EXIT},
        {"image-every", required_argument, NULL, O_IMG_EVERY},
        {"report-above", required_argument, NULL, O_ABOVE},
        {"image-dir", required_argument, NULL, O_IMG_DIR},
        {"dormant", no_argument, NULL, O_DORMANT},
        {"http", required_argument, NULL, O_HTTP},
        {"http-wildcard", no_argument, NULL, O_HTTP_WILDCARD},
        {"report-page", no_argument, NULL, O_REPORT_PAGE},
        {"keep", required_argument, NULL, O_KEEP},
        {"keep-size", required_argument, NULL, O_KEEP_SIZE},
        {"no-collector", no_argument, NULL, O_NO_COLLECTOR},
        {"drop-frames", required_argument, NULL, O_DROP},
        {"keep-alloc-frames", no_argument, NULL, O_KEEP_ALLOC},
        {"instance", required_argument, NULL, O_INSTANCE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const allocators[] = {"mimalloc", "jemalloc", NULL};
    static const char *const symbolizers[] = {"none", "functions", "lines", NULL};
    static const char *const protocols[] = {"ingest", "push", NULL};
    /* --symbolize functions by default: DWARF line tables (`lines`) cost a
     * one-off ~0.2-1 s per process where separate debug info is installed
     * (BENCHMARKS.md), and the views only need function names. */
    run_opts o = {.allocator = "mimalloc",
                  .every = "10s",
                  .every_ms = 10000,
                  .out_dir = "mimprof-out",
                  .symbolize = "functions",
                  .follow_fork = -1,
                  .follow_exec = -1,
                  .keep = MPT_KEEP_DEFAULT,
                  .keep_bytes = MPT_KEEP_BYTES_DEFAULT};
    int c;
    optind = 1;
    opterr = 0;
    /* '+': options end at the command. */
    while ((c = getopt_long(argc, argv, "+:i:a:e:o:s:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (!mpt_parse_size(optarg, &o.interval) || o.interval == 0 ||
                o.interval > MP_PROF_MAX_INTERVAL) {
                fprintf(
                    stderr,
                    "mimprof run: --interval wants a size like 512k or 1m (1 B..1 TiB), not '%s'\n",
                    optarg);
                return EXIT_OWN_ERROR;
            }
            break;
        case 'a':
            if (parse_flag_value("--allocator", optarg, allocators) < 0)
                return EXIT_OWN_ERROR;
            o.allocator = optarg;
            o.allocator_given = true;
            break;
        case 'e':
            if (!mpt_parse_duration_ms(optarg, &o.every_ms)) {
                fprintf(stderr,
                        "mimprof run: --every wants a duration like 10s, 500ms or 0, not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            o.every = optarg;
            o.every_given = true;
            break;
        case 'o':
            o.out_dir = optarg;
            o.out_given = true;
            break;
        case 's':
            if (parse_flag_value("--symbolize", optarg, symbolizers) < 0)
                return EXIT_OWN_ERROR;
            o.symbolize = optarg;
            break;
        case O_DROP:
            /* checked here, where a mistake can still be said */
            if (mp_prof_set_drop_frames(optarg, MP_PROF_DROP_ALLOCATOR) != MP_PROF_OK) {
                fprintf(stderr,
                        "mimprof run: --drop-frames wants a regular expression (POSIX "
                        "extended, up to 4096 bytes), not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            o.drop_frames = optarg;
            break;
        case O_KEEP_ALLOC:
            o.keep_alloc_frames = true;
            break;
        case O_FF:
            o.follow_fork = 1;
            break;
        case O_NFF:
            o.follow_fork = 0;
            break;
        case O_FE:
            o.follow_exec = 1;
            break;
        case O_NFE:
            o.follow_exec = 0;
            break;
        case O_SEED: {
            char *end;
            errno = 0;
            (void)strtoull(optarg, &end, 0);
            if (*end != '\0' || end == optarg || errno != 0) {
                fprintf(stderr, "mimprof run: --seed wants a number, not '%s'\n", optarg);
                return EXIT_OWN_ERROR;
            }
            o.seed = optarg;
            break;
        }
        case O_DEPTH: {
            char *end;
            unsigned long d = strtoul(optarg, &end, 10);
            if (*end != '\0' || d == 0 || d > MP_PROF_MAX_STACK_DEPTH) {
                fprintf(stderr, "mimprof run: --max-depth wants 1..%u, not '%s'\n",
                        MP_PROF_MAX_STACK_DEPTH, optarg);
                return EXIT_OWN_ERROR;
            }
            o.max_depth = optarg;
            break;
        }
        case 'q':
            o.quiet = true;
            break;
        case O_PYRO:
            o.pyro_url = optarg;
            break;
        case O_APP:
            o.pyro_app = optarg;
            break;
        case O_TAG:
            if (o.pyro_ntags == (int)(sizeof o.pyro_tags / sizeof o.pyro_tags[0])) {
                fprintf(stderr,
                        "mimprof run: too many --tag options (Pyroscope keeps at most %d tags)\n",
                        (int)(sizeof o.pyro_tags / sizeof o.pyro_tags[0]));
                return EXIT_OWN_ERROR;
            }
            o.pyro_tags[o.pyro_ntags++] = optarg;
            break;
        case O_TENANT:
            o.pyro_tenant = optarg;
            break;
        case O_BASIC:
        case O_BEARER: {
            char *buf = c == O_BASIC ? o.basic_buf : o.bearer_buf;
            if (strlen(optarg) >= sizeof o.basic_buf) {
                fprintf(stderr, "mimprof run: %s: value too long\n",
                        c == O_BASIC ? "--basic-auth" : "--bearer-token");
                return EXIT_OWN_ERROR;
            }
            strcpy(buf, optarg);
            *(c == O_BASIC ? &o.pyro_basic : &o.pyro_bearer) = buf;
            if (c == O_BEARER)
                blank(optarg);
            else if (strchr(optarg, ':') != NULL)
                blank(strchr(optarg, ':') + 1);
            break;
        }
        case O_PROTO:
            if (parse_flag_value("--pyroscope-protocol", optarg, protocols) < 0)
                return EXIT_OWN_ERROR;
            o.pyro_protocol = optarg;
            break;
        case O_IMG_EXIT:
            o.image_on_exit = true;
            break;
        case O_IMG_EVERY: {
            uint64_t ms;
            if (!mpt_parse_duration_ms(optarg, &ms) || ms == 0) {
                fprintf(stderr,
                        "mimprof run: --image-every wants a duration like 1m or 500ms, not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            o.image_every = optarg;
            break;
        }
        case O_IMG_DIR:
            o.image_dir = optarg;
            break;
        case O_DORMANT:
            o.dormant = true;
            break;
        case O_HTTP:
            o.http = optarg;
            break;
        case O_HTTP_WILDCARD:
            o.http_wildcard = true;
            break;
        case O_REPORT_PAGE:
            o.report_page = true;
            break;
        case O_KEEP: {
            char *end;
            errno = 0;
            unsigned long n = strtoul(optarg, &end, 10);
            if (*end != '\0' || end == optarg || errno != 0 || n > 1000000) {
                fprintf(stderr,
                        "mimprof run: --keep wants a number of reports per process (0: all), "
                        "not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            o.keep = (unsigned)n;
            break;
        }
        case O_KEEP_SIZE:
            if (strcmp(optarg, "0") == 0) {
                o.keep_bytes = 0;
            } else if (!mpt_parse_size(optarg, &o.keep_bytes) || o.keep_bytes == 0) {
                fprintf(stderr,
                        "mimprof run: --keep-size wants a size like 256m or 1g (0: no cap), "
                        "not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            break;
        case O_NO_COLLECTOR:
            o.no_collector = true;
            break;
        case O_INSTANCE:
            o.pyro_instance = optarg;
            break;
        case O_ABOVE: {
            uint64_t bytes;
            unsigned pct;
            if (!mpt_parse_threshold(optarg, &bytes, &pct)) {
                fprintf(stderr,
                        "mimprof run: --report-above wants a size like 100m or a percentage of "
                        "the cgroup's memory limit like 90%%, not '%s'\n",
                        optarg);
                return EXIT_OWN_ERROR;
            }
            o.report_above = optarg;
            break;
        }
        case 'h':
            mpt_usage(stdout, "run");
            return MPT_EXIT_OK;
        default: /* ':' (an option without its value) or an unknown one */
            mpt_usage_bad_option("run", c, argv[optind - 1]);
            return EXIT_OWN_ERROR;
        }
    }
    if (o.http != NULL) {
        char why[512];
        if (mp_prof_control_check_http(o.http, o.http_wildcard, why, sizeof why) != MP_PROF_OK) {
            fprintf(stderr, "mimprof run: --http %s: %s\n", o.http, why);
            return EXIT_OWN_ERROR;
        }
    }
    if (optind >= argc) {
        fprintf(stderr,
                "mimprof run: no command to run (mimprof run [options] -- CMD [ARGS...])\n");
        return EXIT_OWN_ERROR;
    }

    struct timespec start;
    clock_gettime(CLOCK_REALTIME, &start);
    int rc = mpt_run_command(&o, argv + optind);
    if (o.report_page)
        run_report_page(&o, (int64_t)(start.tv_sec - 1) * 1000000000);
    return rc;
}
