/* SPDX-License-Identifier: MIT */
/* mimprof image pprof|top|diff|info: heap images (mp_profiler_write_image)
 * read in another process, later, possibly on another machine.
 *
 * An image becomes the pprof the writing process's report() would have
 * given at the snapshot (<mimprof/profiling_image.h>: the report side's
 * builder and symbolizer over the image's mappings, files checked by
 * build-id); top and diff are the pprof views of top.c and diff.c over it. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <mimprof/profiling_image.h>

#include "units.h"
#include "views.h"

static const char USAGE_IMAGE[] =
    "usage: mimprof image COMMAND FILE... [options]\n"
    "\n"
    "Heap images: a profiled process's live state saved by mp_profiler_write_image(),\n"
    "`mimprof run --image-on-exit | --image-every DURATION` or SIGUSR2 with\n"
    "MIMPROF_IMAGE=DIR, read here without the process.\n"
    "\n"
    "commands:\n"
    "  pprof FILE -o OUT     the profile report() gave at the snapshot (OUT.gz: gzipped; - = "
    "stdout)\n"
    "  top FILE              the top functions (as mimprof top)\n"
    "  diff BASE NEW         what grew and shrank between two images (as mimprof diff)\n"
    "  info FILE             when, who, configuration, counters, totals, mappings\n"
    "\n"
    "options:\n"
    "      --binary-path DIR  also look for the mappings' files in DIR: "
    "DIR/.build-id/xx/yyyy.debug,\n"
    "                         DIR/.build-id/xx/yyyy, DIR/<path>, DIR/<basename>\n"
    "  -s, --symbolize MODE   none | functions | lines (default: the image's session setting)\n"
    "  -o, --output OUT       (pprof) output file\n"
    "  -t, --type TYPE        (top, diff) sample type (default inuse_space)\n"
    "  -n N                   (top, diff) rows (default 20; 0 = all)\n"
    "      --cum              (top, diff) sort by cumulative value\n"
    "      --older-than D     (top, diff) only memory at least D old at the snapshot (10m, 1h)\n"
    "      --younger-than D   (top, diff) only memory less than D old at the snapshot\n"
    "      --age              (top) a column with each function's median age at the snapshot\n"
    "      --no-demangle      (top, diff) linkage names as written (the pprof carries both)\n"
    "      --peak             (pprof, top, diff) the window's peak the image holds instead of\n"
    "                         the snapshot: what was live at the highest estimated heap since\n"
    "                         the last report (in-use sample types)\n"
    "\n"
    "Symbols come from files with the build-id the mapping recorded; a file with another\n"
    "build-id is never used (a line on stderr says which), and that mapping's locations keep\n"
    "their addresses and build-id. Exit status: 0; 1 when an image is refused or a file\n"
    "cannot be written; 2 for usage errors.\n";

typedef struct img_opts {
    const char *binary_path;
    int symbolize; /* -1: the image's */
    const char *output;
    const char *type;
    size_t n;
    bool cum;
    bool raw_names; /* --no-demangle (top, diff) */
    bool peak;      /* --peak: the window's peak instead of the snapshot */
    bool ages;      /* --age (top) */
    mpt_limits age; /* --older-than / --younger-than (top, diff): its age filters only */
} img_opts;

static void note(void *ctx, const char *line)
{
    fprintf(stderr, "mimprof image: %s: %s\n", (const char *)ctx, line);
}

static mp_prof_image *load(const char *path)
{
    mp_prof_image *img = NULL;
    char err[1024];
    uint8_t *buf = NULL;
    size_t len = 0;
    /* read here, under the readers' bound (MIMPROF_READ_LIMIT) */
    if (mpt_read_bounded(path, mpt_read_limit(), &buf, &len, err, sizeof err) != 0) {
        fprintf(stderr, "mimprof image: %s\n", err);
        return NULL;
    }
    mp_prof_status st = mp_prof_image_open_memory(buf, len, &img, err, sizeof err);
    free(buf);
    if (st != MP_PROF_OK) {
        fprintf(stderr, "mimprof image: %s: %s\n", path, err);
        return NULL;
    }
    return img;
}

static int to_pprof(const char *path, const mp_prof_image *img, const img_opts *o, uint8_t **buf,
                    size_t *len)
{
    mp_prof_image_pprof_opts po = {
        .binary_path = o->binary_path,
        .symbolize = o->symbolize,
        .note = note,
        .note_ctx = (void *)path,
        .peak = o->peak,
    };
    mp_prof_status st = mp_prof_image_pprof(img, &po, buf, len);
    if (st == MP_PROF_E_BAD_IMAGE && o->peak) {
        fprintf(stderr, "mimprof image: %s: holds no peak (written by a mimprof without it)\n",
                path);
        return -1;
    }
    if (st != MP_PROF_OK) {
        fprintf(stderr, "mimprof image: %s: %s\n", path, mp_prof_strerror(st));
        return -1;
    }
    return 0;
}

/* The image as a parsed profile, for the views. */
static mpt_profile *profile_of(const char *path, const img_opts *o)
{
    mp_prof_image *img = load(path);
    if (img == NULL)
        return NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    mpt_profile *p = NULL;
    if (to_pprof(path, img, o, &buf, &len) == 0) {
        char err[640];
        mpt_limits lim;
        mpt_limits_init(&lim);
        lim.raw_names = o->raw_names;
        lim.older_than_ns = o->age.older_than_ns;
        lim.younger_than_ns = o->age.younger_than_ns;
        if (mpt_profile_parse(buf, len, &lim, &p, err, sizeof err) != 0)
            fprintf(stderr, "mimprof image: %s: %s\n", path, err);
    }
    mp_prof_buffer_free(buf);
    mp_prof_image_free(img);
    return p;
}

static int write_out(const char *out, const uint8_t *buf, size_t len)
{
    if (strcmp(out, "-") == 0)
        return fwrite(buf, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -1;
    size_t n = strlen(out);
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", out, (long)getpid()) < 0)
        return -1;
    int rc = -1;
    if (n > 3 && strcmp(out + n - 3, ".gz") == 0) {
        gzFile g = gzopen(tmp, "wb6");
        if (g != NULL) {
            size_t off = 0;
            while (off < len) {
                unsigned chunk = len - off > (1u << 30) ? (1u << 30) : (unsigned)(len - off);
                if (gzwrite(g, buf + off, chunk) != (int)chunk)
                    break;
                off += chunk;
            }
            rc = gzclose(g) == Z_OK && off == len ? 0 : -1;
        }
    } else {
        FILE *f = fopen(tmp, "wb");
        if (f != NULL) {
            bool ok = fwrite(buf, 1, len, f) == len;
            rc = fclose(f) == 0 && ok ? 0 : -1;
        }
    }
    if (rc == 0 && rename(tmp, out) != 0)
        rc = -1;
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

static int cmd_pprof(const char *file, const img_opts *o)
{
    if (o->output == NULL) {
        fprintf(stderr, "mimprof image pprof: want -o OUT (see mimprof image --help)\n");
        return MPT_EXIT_USAGE;
    }
    mp_prof_image *img = load(file);
    if (img == NULL)
        return MPT_EXIT_FAIL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = MPT_EXIT_FAIL;
    if (to_pprof(file, img, o, &buf, &len) == 0) {
        if (write_out(o->output, buf, len) == 0)
            rc = MPT_EXIT_OK;
        else
            fprintf(stderr, "mimprof image: cannot write %s: %s\n", o->output, strerror(errno));
    }
    mp_prof_buffer_free(buf);
    mp_prof_image_free(img);
    return rc;
}

static int cmd_top(const char *file, const img_opts *o)
{
    mpt_profile *p = profile_of(file, o);
    if (p == NULL)
        return MPT_EXIT_FAIL;
    char err[640];
    int rc = MPT_EXIT_OK;
    int t = mpt_profile_pick_type(p, o->type, err, sizeof err);
    if (t < 0) {
        fprintf(stderr, "mimprof image top: %s\n", err);
        rc = MPT_EXIT_FAIL;
    } else if (mpt_top_print(stdout, p, (size_t)t, o->n, o->cum, o->ages) != 0) {
        fprintf(stderr, "mimprof image top: out of memory or write error\n");
        rc = MPT_EXIT_FAIL;
    }
    mpt_profile_free(p);
    return rc;
}

static int cmd_diff(const char *a, const char *b, const img_opts *o)
{
    mpt_profile *pa = profile_of(a, o);
    mpt_profile *pb = pa != NULL ? profile_of(b, o) : NULL;
    int rc = MPT_EXIT_FAIL;
    char err[640];
    if (pa != NULL && pb != NULL) {
        if (mpt_diff_print(stdout, pa, pb, o->type, o->n, o->cum, err, sizeof err) == 0)
            rc = MPT_EXIT_OK;
        else
            fprintf(stderr, "mimprof image diff: %s\n", err);
    }
    mpt_profile_free(pa);
    mpt_profile_free(pb);
    return rc;
}

/* ---- info --------------------------------------------------------------- */

static const char *when(uint64_t ns, char *buf, size_t n)
{
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (ns == 0 || gmtime_r(&t, &tm) == NULL || strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, n, "?");
    return buf;
}

static const char *mode_name(int m)
{
    return m == MP_PROF_SYMBOLIZE_NONE    ? "none"
           : m == MP_PROF_SYMBOLIZE_LINES ? "lines"
                                          : "functions";
}

static int cmd_info(const char *file, const img_opts *o)
{
    mp_prof_image *img = load(file);
    if (img == NULL)
        return MPT_EXIT_FAIL;
    struct stat st;
    char t1[64], t2[64], v1[32], v2[32], v3[32];
    mp_prof_image_info in;
    mp_prof_image_info_get(img, &in);
    printf("%-12s %s (%lld bytes)\n", "image", file,
           stat(file, &st) == 0 ? (long long)st.st_size : -1LL);
    printf("%-12s mimprof-profiling %s, pid %llu, session generation %llu\n", "written by",
           in.version, (unsigned long long)in.pid, (unsigned long long)in.generation);
    uint64_t snap = in.snapshot_ns, from = in.interval_start_ns;
    printf("%-12s %s\n", "snapshot", when(snap, t1, sizeof t1));
    mpt_format_value(v1, sizeof v1, snap > from ? (double)(snap - from) : 0, "nanoseconds");
    printf("%-12s since %s (%s before the snapshot)\n", "interval", when(from, t2, sizeof t2), v1);
    const mp_prof_config *c = &in.config;
    mpt_format_value(v1, sizeof v1, (double)c->sample_interval_bytes, "bytes");
    printf("%-12s sample interval %s, max depth %u, symbolize %s, seed %s%llu, ring %zu, "
           "max live %zu\n",
           "config", v1, c->max_stack_depth, mode_name(c->symbolize), c->seed ? "" : "random ",
           (unsigned long long)c->seed, c->ring_capacity, c->max_live_samples);
    mpt_format_value(v1, sizeof v1, in.live_bytes, "bytes");
    printf("%-12s %zu samples: ~%.0f objects, ~%s\n", "live", in.live_samples, in.live_objects, v1);
    mpt_format_value(v2, sizeof v2, in.interval_bytes, "bytes");
    printf("%-12s %llu samples on %zu stacks: ~%.0f objects, ~%s\n", "allocated",
           (unsigned long long)in.interval_records, in.interval_stacks, in.interval_objects, v2);
    if (in.has_peak) {
        char t3[64];
        mpt_format_value(v2, sizeof v2, (double)in.peak_bytes, "bytes");
        printf("%-12s ~%s at %s (the window's peak so far: --peak)\n", "peak", v2,
               when((uint64_t)in.peak_time_ns, t3, sizeof t3));
    }
    printf("%-12s %zu distinct, %llu frames (%llu as code(build-id, path, offset), %llu raw)\n",
           "stacks", in.stacks, (unsigned long long)in.frames, (unsigned long long)in.named_frames,
           (unsigned long long)(in.frames - in.named_frames));
    const mp_prof_stats *s = &in.counters;
    printf(
        "%-12s taken %llu, reported %llu, waiting %llu, discarded %llu, dropped %llu "
        "(registration %llu, teardown %llu, overflow %llu), live-table drops %llu, "
        "threads %llu\n",
        "counters", (unsigned long long)s->samples_taken, (unsigned long long)s->samples_reported,
        (unsigned long long)(s->ring_records + s->overflow_records),
        (unsigned long long)s->records_discarded,
        (unsigned long long)(s->dropped_registration + s->dropped_teardown +
                             s->dropped_overflow_full),
        (unsigned long long)s->dropped_registration, (unsigned long long)s->dropped_teardown,
        (unsigned long long)s->dropped_overflow_full,
        (unsigned long long)s->dropped_live_table_full, (unsigned long long)s->registered_threads);
    printf("mappings (%zu)\n", in.mappings);
    for (size_t i = 0; i < in.mappings; i++) {
        mp_prof_image_mapping mp;
        mp_prof_image_mapping_get(img, i, &mp);
        char why[2048], *found = NULL;
        mp_prof_image_symbols w =
            mp_prof_image_locate(img, i, o->binary_path, &found, why, sizeof why);
        uint64_t lo_a = mp.start, hi_a = mp.limit;
        mpt_format_value(v3, sizeof v3, (double)(hi_a - lo_a), "bytes");
        printf("  %2zu %s%s%s\n", i + 1, mp.path, mp.main ? " (main)" : "",
               mp.loaded ? "" : " (unloaded)");
        printf("     build-id %s, 0x%llx-0x%llx (%s), %zu executable segment%s\n",
               mp.build_id[0] ? mp.build_id : "(none)", (unsigned long long)lo_a,
               (unsigned long long)hi_a, v3, mp.segments, mp.segments == 1 ? "" : "s");
        if (w == MP_PROF_IMAGE_SYMBOLS_FOUND)
            printf("     symbols: %s\n", found);
        else if (w != MP_PROF_IMAGE_SYMBOLS_NO_FILE)
            printf("     symbols: none: %s\n", why);
        free(found);
    }
    mp_prof_image_free(img);
    return ferror(stdout) ? MPT_EXIT_FAIL : MPT_EXIT_OK;
}

int mpt_cmd_image(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(USAGE_IMAGE, argc < 2 ? stderr : stdout);
        return argc < 2 ? MPT_EXIT_USAGE : MPT_EXIT_OK;
    }
    const char *sub = argv[1];
    int want;
    if (strcmp(sub, "pprof") == 0 || strcmp(sub, "top") == 0 || strcmp(sub, "info") == 0)
        want = 1;
    else if (strcmp(sub, "diff") == 0)
        want = 2;
    else {
        fprintf(stderr, "mimprof image: unknown command '%s' (see mimprof image --help)\n", sub);
        return MPT_EXIT_USAGE;
    }
    static const struct option longopts[] = {
        {"binary-path", required_argument, NULL, 'b'},
        {"symbolize", required_argument, NULL, 's'},
        {"output", required_argument, NULL, 'o'},
        {"type", required_argument, NULL, 't'},
        {"cum", no_argument, NULL, 'c'},
        {"older-than", required_argument, NULL, MPT_OPT_OLDER},
        {"younger-than", required_argument, NULL, MPT_OPT_YOUNGER},
        {"age", no_argument, NULL, 'A'},
        {"no-demangle", no_argument, NULL, 'D'},
        {"peak", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    img_opts o = {.symbolize = -1, .n = 20};
    mpt_limits_init(&o.age);
    int c;
    optind = 1;
    opterr = 0;
    argc--;
    argv++;
    while ((c = getopt_long(argc, argv, ":b:s:o:t:n:ch", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            o.binary_path = optarg;
            break;
        case 's':
            if (strcmp(optarg, "none") == 0)
                o.symbolize = MP_PROF_SYMBOLIZE_NONE;
            else if (strcmp(optarg, "functions") == 0)
                o.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
            else if (strcmp(optarg, "lines") == 0)
                o.symbolize = MP_PROF_SYMBOLIZE_LINES;
            else {
                fprintf(stderr,
                        "mimprof image: --symbolize wants none, functions or lines, "
                        "not '%s'\n",
                        optarg);
                return MPT_EXIT_USAGE;
            }
            break;
        case 'o':
            o.output = optarg;
            break;
        case 't':
            o.type = optarg;
            break;
        case 'n': {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || optarg[0] == '-') {
                fprintf(stderr, "mimprof image: -n wants a number, not '%s'\n", optarg);
                return MPT_EXIT_USAGE;
            }
            o.n = (size_t)v;
            break;
        }
        case 'c':
            o.cum = true;
            break;
        case 'P':
            o.peak = true;
            break;
        case MPT_OPT_OLDER:
        case MPT_OPT_YOUNGER: {
            int rc = mpt_parse_age_opt("image", c, optarg, &o.age);
            if (rc >= 0)
                return rc;
            break;
        }
        case 'A':
            o.ages = true;
            break;
        case 'D':
            o.raw_names = true;
            break;
        case 'h':
            fputs(USAGE_IMAGE, stdout);
            return MPT_EXIT_OK;
        default: /* ':' (an option without its value) or an unknown one */
            mpt_usage_bad_option("image", c, argv[optind - 1]);
            return MPT_EXIT_USAGE;
        }
    }
    if (argc - optind != want) {
        fprintf(stderr, "mimprof image %s: want %s (see mimprof image --help)\n", sub,
                want == 2 ? "BASE and NEW images" : "exactly one image FILE");
        return MPT_EXIT_USAGE;
    }
    if (o.binary_path != NULL) {
        struct stat st;
        if (stat(o.binary_path, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "mimprof image: --binary-path %s is not a directory\n", o.binary_path);
            return MPT_EXIT_USAGE;
        }
    }
    const char *f = argv[optind];
    if (strcmp(sub, "pprof") == 0)
        return cmd_pprof(f, &o);
    if (strcmp(sub, "top") == 0)
        return cmd_top(f, &o);
    if (strcmp(sub, "info") == 0)
        return cmd_info(f, &o);
    return cmd_diff(f, argv[optind + 1], &o);
}
