/* SPDX-License-Identifier: MIT */
/* mimprof run: runs a command with the profiling preload.
 *
 * The command runs as a child: mimprof waits for it, forwards SIGTERM,
 * SIGHUP, SIGUSR1, SIGUSR2 (and SIGINT / SIGQUIT when sent by kill(); a
 * terminal already sends those to the whole process group) and exits with
 * its status: the command's exit code; 128 + N when signal N killed it
 * (reported on stderr, like a shell); 127 when it cannot be run (not
 * found, not executable: the reason on stderr); 125 for mimprof's own
 * errors (bad option, no preload object, unusable output directory).
 *
 * What the preload does with the environment set here is the contract in
 * preload_runtime.h.
 *
 * Pyroscope (--pyroscope URL --app NAME ...): the flags, applied over the
 * PYROSCOPE_* variables already set, are checked here with
 * libmimprof-pyroscope's own rules (dlopen()ed: nothing in this package
 * links it) before the command starts, then exported as PYROSCOPE_* with
 * MIMPROF_PYROSCOPE_LIB naming the library, which the preload runtime
 * loads to upload every report (preload_runtime.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "fsutil.h"
#include "pyro_api.h"
#include "units.h"
#include "views.h"
#include <mimprof/profiling_control.h>

#ifndef MPT_PRELOAD_BUILD_REL
#define MPT_PRELOAD_BUILD_REL "../preload"
#endif
#ifndef MPT_PRELOAD_INSTALL_REL
#define MPT_PRELOAD_INSTALL_REL "../lib"
#endif
/* The workspace build tree's libmimprof-pyroscope, relative to this
 * executable's directory ("" outside the workspace). */
#ifndef MPT_PYROSCOPE_BUILD_REL
#define MPT_PYROSCOPE_BUILD_REL ""
#endif

enum { EXIT_CANNOT_RUN = 127, EXIT_OWN_ERROR = 125 };

typedef struct run_opts {
    uint64_t interval;     /* 0: the preload's default */
    const char *allocator; /* mimalloc | jemalloc */
    const char *every;     /* as given, validated */
    uint64_t every_ms;
    const char *out_dir;
    const char *symbolize; /* none | functions | lines */
    const char *seed;
    const char *max_depth;
    int follow_fork; /* -1: default (yes) */
    int follow_exec; /* -1: default (no) */
    bool quiet;
    bool dormant;       /* --dormant: MIMPROF_DORMANT=1 */
    const char *http;   /* --http ADDR:PORT: MIMPROF_HTTP */
    bool http_wildcard; /* --http-wildcard */
    bool every_given;
    bool out_given;
    /* Pyroscope */
    const char *pyro_url;
    const char *pyro_app;
    const char *pyro_tenant;
    const char *pyro_protocol;
    char *pyro_basic;  /* USER[:PASS] in basic_buf (the argv copy is blanked) */
    char *pyro_bearer; /* in bearer_buf, likewise */
    char basic_buf[4096];
    char bearer_buf[4096];
    const char *pyro_tags[64];
    int pyro_ntags;
    bool pyro; /* uploading: --pyroscope or PYROSCOPE_SERVER_ADDRESS */
    /* Heap images (MIMPROF_IMAGE*, runtime/image_runtime.h) */
    bool image_on_exit;
    const char *image_every;  /* as given, validated */
    const char *image_dir;    /* NULL: the output directory */
    const char *report_above; /* --report-above SIZE|N%, validated (MIMPROF_REPORT_ABOVE) */
} run_opts;

static volatile sig_atomic_t g_child = 0;

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* SIGINT/SIGQUIT from the terminal reach the child directly. */
    if ((sig == SIGINT || sig == SIGQUIT) && si != NULL && si->si_code != SI_USER &&
        si->si_code != SI_QUEUE)
        return;
    if (g_child > 0)
        kill((pid_t)g_child, sig);
}

/* Finds libmimprof-preload-<alloc>.so: $MIMPROF_PRELOAD_DIR, then next to
 * this executable in the build tree, then in the install prefix. Writes
 * the real path into out; on failure lists the places looked at. */
static int find_preload(const char *alloc, char *out, size_t outlen, char *looked, size_t lookedlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char dirs[3][PATH_MAX];
    int nd = 0;
    const char *env = getenv("MIMPROF_PRELOAD_DIR");
    if (env != NULL && env[0] != '\0')
        snprintf(dirs[nd++], PATH_MAX, "%s", env);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL)
            *slash = '\0';
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_BUILD_REL);
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_INSTALL_REL);
    }
    size_t off = 0;
    looked[0] = '\0';
    for (int i = 0; i < nd; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%.3900s/libmimprof-preload-%.32s.so", dirs[i], alloc);
        if (access(cand, R_OK) == 0 && realpath(cand, out) != NULL && strlen(out) < outlen)
            return 0;
        int w = snprintf(looked + off, lookedlen - off, "%s%.1000s", i ? ", " : "", dirs[i]);
        if (w > 0 && (size_t)w < lookedlen - off)
            off += (size_t)w;
    }
    return -1;
}

/* Hides a secret given on the command line from ps (/proc/PID/cmdline
 * shows this process's argv memory) once it has been copied. */
static void blank(char *s) { memset(s, 'x', strlen(s)); }

#if MPT_HAVE_PYROSCOPE
/* Loads libmimprof-pyroscope: $MIMPROF_PYROSCOPE_LIB alone when set; else
 * next to the preload object, in the workspace build tree, in the install
 * prefix (libdir), then the dynamic loader's search. On failure `looked`
 * lists the places and `err` the loader's complaint about a file that
 * exists but did not load. */
static int find_pyroscope(const char *preload, mpt_pyro_api *api, char *looked, size_t lookedlen,
                          char *err, size_t errlen)
{
    err[0] = looked[0] = '\0';
    const char *env = getenv("MIMPROF_PYROSCOPE_LIB");
    if (env != NULL && env[0] != '\0') {
        snprintf(looked, lookedlen, "MIMPROF_PYROSCOPE_LIB=%s", env);
        return mpt_pyro_open(env, true, api, err, errlen) ? 0 : -1;
    }
    char dirs[3][PATH_MAX];
    int nd = 0;
    const char *slash = strrchr(preload, '/');
    if (slash != NULL)
        snprintf(dirs[nd++], PATH_MAX, "%.*s", (int)(slash - preload), preload);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *s = strrchr(exe, '/');
        if (s != NULL)
            *s = '\0';
        if (MPT_PYROSCOPE_BUILD_REL[0] != '\0')
            snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PYROSCOPE_BUILD_REL);
        snprintf(dirs[nd++], PATH_MAX, "%.3000s/%s", exe, MPT_PRELOAD_INSTALL_REL);
    }
    size_t off = 0;
    char e[1024];
    for (int i = 0; i < nd; i++) {
        static const char *const names[] = {MPT_PYRO_SONAME, MPT_PYRO_DEVNAME};
        for (int k = 0; k < 2; k++) {
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%.4000s/%s", dirs[i], names[k]);
            if (access(cand, R_OK) != 0)
                continue;
            if (mpt_pyro_open(cand, true, api, e, sizeof e))
                return 0;
            if (err[0] == '\0')
                snprintf(err, errlen, "%s", e);
            break;
        }
        int w = snprintf(looked + off, lookedlen - off, "%s%.1000s", i ? ", " : "", dirs[i]);
        if (w > 0 && (size_t)w < lookedlen - off)
            off += (size_t)w;
    }
    if (mpt_pyro_open(MPT_PYRO_SONAME, true, api, e, sizeof e))
        return 0;
    snprintf(looked + off, lookedlen - off, "%sthe dynamic loader's path", nd ? ", " : "");
    return -1;
}

/* Checks the upload configuration -- the PYROSCOPE_* variables already
 * set, then the flags over them -- with the adapter's own rules, and
 * exports it for the preload. One line on stderr naming the flag or
 * variable and the rule on error. */
static int setup_pyroscope(run_opts *o, const char *preload)
{
    mpt_pyro_api api;
    char looked[4096], err[1024];
    /* Uploading was asked for by the flag, or by the environment alone. */
    const char *who = o->pyro_url != NULL ? "--pyroscope" : "PYROSCOPE_SERVER_ADDRESS";
    if (find_pyroscope(preload, &api, looked, sizeof looked, err, sizeof err) != 0) {
        fprintf(stderr,
                "mimprof run: %s needs libmimprof-pyroscope (looked in: %s%s%s; "
                "set MIMPROF_PYROSCOPE_LIB, or build the workspace with -Dpyroscope=enabled)\n",
                who, looked, err[0] ? "; " : "", err);
        return -1;
    }
    /* --basic-auth USER[:PASS]: without PASS, PYROSCOPE_BASIC_AUTH_PASSWORD;
     * the flag's user goes with it (the environment is read first). */
    const char *basic_pass = NULL;
    if (o->pyro_basic != NULL) {
        char *colon = strchr(o->pyro_basic, ':');
        if (colon != NULL)
            *colon = '\0';
        basic_pass = colon != NULL ? colon + 1 : getenv("PYROSCOPE_BASIC_AUTH_PASSWORD");
        if (basic_pass == NULL || basic_pass[0] == '\0') {
            fprintf(stderr,
                    "mimprof run: --basic-auth %s has no password (USER:PASS, or USER and "
                    "PYROSCOPE_BASIC_AUTH_PASSWORD)\n",
                    o->pyro_basic);
            mpt_pyro_close(&api);
            return -1;
        }
        if (setenv("PYROSCOPE_BASIC_AUTH_USER", o->pyro_basic, 1) != 0) {
            fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
            mpt_pyro_close(&api);
            return -1;
        }
    }
    mp_pyro_config *cfg = NULL;
    const char *what = NULL; /* the flag being applied */
    mp_pyro_status st = api.config_new(&cfg);
    if (st == MP_PYRO_OK)
        st = api.config_from_env(cfg);
    if (st == MP_PYRO_OK && o->pyro_url != NULL) {
        what = "--pyroscope";
        st = api.config_set_server(cfg, o->pyro_url);
    }
    if (st == MP_PYRO_OK && o->pyro_app != NULL) {
        what = "--app";
        st = api.config_set_app_name(cfg, o->pyro_app);
    }
    for (int i = 0; st == MP_PYRO_OK && i < o->pyro_ntags; i++) {
        what = "--tag";
        st = api.config_add_tags(cfg, o->pyro_tags[i]);
    }
    if (st == MP_PYRO_OK && o->pyro_tenant != NULL) {
        what = "--tenant";
        st = api.config_set_tenant(cfg, o->pyro_tenant);
    }
    if (st == MP_PYRO_OK && o->pyro_protocol != NULL)
        st = api.config_set_protocol(cfg, strcmp(o->pyro_protocol, "push") == 0
                                              ? MP_PYRO_PROTOCOL_PUSH
                                              : MP_PYRO_PROTOCOL_INGEST);
    if (st == MP_PYRO_OK && o->pyro_basic != NULL) {
        /* The flag replaces any credentials from the environment. */
        what = "--basic-auth";
        st = api.config_set_bearer_token(cfg, NULL);
        if (st == MP_PYRO_OK)
            st = api.config_set_basic_auth(cfg, o->pyro_basic, basic_pass);
    }
    if (st == MP_PYRO_OK && o->pyro_bearer != NULL) {
        what = "--bearer-token";
        st = api.config_set_basic_auth(cfg, NULL, NULL);
        if (st == MP_PYRO_OK)
            st = api.config_set_bearer_token(cfg, o->pyro_bearer);
    }
    if (st == MP_PYRO_OK) {
        what = NULL;
        st = api.config_validate(cfg);
    }
    if (st != MP_PYRO_OK) {
        const char *why = cfg != NULL ? api.config_error(cfg) : "";
        const char *app = getenv("PYROSCOPE_APPLICATION_NAME");
        if (st == MP_PYRO_E_NOT_CONFIGURED && o->pyro_app == NULL &&
            (app == NULL || app[0] == '\0'))
            fprintf(stderr, "mimprof run: %s needs --app NAME (or PYROSCOPE_APPLICATION_NAME)\n",
                    who);
        else
            fprintf(stderr, "mimprof run: %s%s%s\n", what != NULL ? what : "",
                    what != NULL ? ": " : "", why != NULL && why[0] ? why : api.strerror(st));
        goto fail;
    }
    char path[PATH_MAX];
    mpt_pyro_path(&api, path, sizeof path);
    char real[PATH_MAX];
    if (api.config_export_env(cfg) != MP_PYRO_OK ||
        setenv("MIMPROF_PYROSCOPE_LIB", realpath(path, real) != NULL ? real : path, 1) != 0) {
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
        goto fail;
    }
    if (o->quiet)
        unsetenv("MIMPROF_PYROSCOPE_SUMMARY");
    else
        setenv("MIMPROF_PYROSCOPE_SUMMARY", "1", 1);
    /* Without --every, a report per upload interval (PYROSCOPE_UPLOAD_INTERVAL,
     * default 10 s, exported as "<ms>ms"). */
    const char *ui = getenv("PYROSCOPE_UPLOAD_INTERVAL");
    uint64_t ms;
    if (!o->every_given && ui != NULL && mpt_parse_duration_ms(ui, &ms) && ms > 0)
        o->every_ms = ms;
    api.config_free(cfg);
    mpt_pyro_close(&api);
    return 0;
fail:
    api.config_free(cfg);
    mpt_pyro_close(&api);
    return -1;
}
#else
static int setup_pyroscope(run_opts *o, const char *preload)
{
    (void)o;
    (void)preload;
    fprintf(stderr, "mimprof run: --pyroscope: this mimprof was built without Pyroscope support "
                    "(<mimprof/pyroscope.h> was not found at build time)\n");
    return -1;
}
#endif

static int build_env(const run_opts *o, const char *preload, const char *abs_dir)
{
    const char *old = getenv("LD_PRELOAD");
    char *lp;
    if (old != NULL && old[0] != '\0') {
        if (asprintf(&lp, "%s:%s", preload, old) < 0)
            return -1;
    } else {
        lp = strdup(preload);
        if (lp == NULL)
            return -1;
    }
    int rc = setenv("LD_PRELOAD", lp, 1);
    free(lp);
    char num[64];
    /* With a '/': a directory to the runtime, whatever is there later. */
    char out[PATH_MAX + 1];
    if (abs_dir != NULL && snprintf(out, sizeof out, "%s/", abs_dir) < (int)sizeof out)
        rc |= setenv("MIMPROF_OUTPUT", out, 1);
    else
        unsetenv("MIMPROF_OUTPUT"); /* uploads only */
    if (o->interval != 0) {
        snprintf(num, sizeof num, "%llu", (unsigned long long)o->interval);
        rc |= setenv("MIMPROF_INTERVAL", num, 1);
    } else {
        unsetenv("MIMPROF_INTERVAL");
    }
    snprintf(num, sizeof num, "%llums", (unsigned long long)o->every_ms);
    rc |= setenv("MIMPROF_EVERY", num, 1);
    rc |= setenv("MIMPROF_SYMBOLIZE", o->symbolize, 1);
    if (o->seed != NULL)
        rc |= setenv("MIMPROF_SEED", o->seed, 1);
    if (o->max_depth != NULL)
        rc |= setenv("MIMPROF_STACK_DEPTH", o->max_depth, 1);
    rc |= setenv("MIMPROF_FOLLOW_FORK", o->follow_fork == 0 ? "0" : "1", 1);
    rc |= setenv("MIMPROF_FOLLOW_EXEC", o->follow_exec == 1 ? "1" : "0", 1);
    if (o->quiet)
        rc |= setenv("MIMPROF_QUIET", "1", 1);
    if (o->dormant)
        rc |= setenv("MIMPROF_DORMANT", "1", 1);
    if (o->http != NULL)
        rc |= setenv("MIMPROF_HTTP", o->http, 1);
    if (o->http_wildcard)
        rc |= setenv("MIMPROF_HTTP_WILDCARD", "1", 1);
    if (o->report_above != NULL)
        rc |= setenv("MIMPROF_REPORT_ABOVE", o->report_above, 1);
    return rc == 0 ? 0 : -1;
}

/* --image-*: MIMPROF_IMAGE (absolute, created), MIMPROF_IMAGE_EVERY and
 * MIMPROF_IMAGE_ON_EXIT; without them the environment's MIMPROF_IMAGE, if
 * any, passes through (SIGUSR2 images). */
static int image_env(const run_opts *o)
{
    if (!o->image_on_exit && o->image_every == NULL && o->image_dir == NULL)
        return 0;
    const char *dir = o->image_dir != NULL ? o->image_dir : o->out_dir;
    char abs[PATH_MAX];
    if (mpt_mkdir_dir(dir) != 0 || realpath(dir, abs) == NULL || mpt_dir_writable(abs) != 0) {
        fprintf(stderr, "mimprof run: cannot use image directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = setenv("MIMPROF_IMAGE", abs, 1);
    if (o->image_every != NULL)
        rc |= setenv("MIMPROF_IMAGE_EVERY", o->image_every, 1);
    else
        unsetenv("MIMPROF_IMAGE_EVERY");
    rc |= setenv("MIMPROF_IMAGE_ON_EXIT", o->image_on_exit ? "1" : "0", 1);
    if (rc != 0)
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
    return rc == 0 ? 0 : -1;
}

/* Counts the reports in dir newer than `since` and names the newest one
 * of `pid` (or of any process when none of pid's exists). */
/* The private directory through which the profiled processes report
 * what `mimprof run` prints for them after the program ended (their
 * upload summaries: preload_runtime.h, MIMPROF_STATUS_DIR). A file path,
 * not a descriptor: it works whatever the program does with its
 * descriptors (a program that closes stderr at exit, or every descriptor
 * at start), and the program sees no descriptor of ours. "" when it
 * cannot be made (the processes then write to their stderr). */
static void status_dir_make(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/')
        tmp = "/tmp";
    if (snprintf(dir, cap, "%s/mimprof-run-XXXXXX", tmp) >= (int)cap || mkdtemp(dir) == NULL ||
        setenv("MIMPROF_STATUS_DIR", dir, 1) != 0)
        dir[0] = '\0';
}

/* Prints every process's status file (in name order) and removes them
 * and the directory. */
static void status_dir_print(const char *dir)
{
    if (dir[0] == '\0')
        return;
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        char path[4400];
        if (names[i]->d_name[0] != '.' &&
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) < (int)sizeof path) {
            int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            char buf[4096];
            ssize_t r;
            while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0)
                fwrite(buf, 1, (size_t)r, stderr);
            if (fd >= 0)
                close(fd);
            unlink(path);
        }
        free(names[i]);
    }
    free(names);
    rmdir(dir);
}

static void summarize(const char *dir, time_t since, pid_t pid, bool quiet)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    unsigned count = 0, best_seq = 0;
    char best[NAME_MAX + 1] = "";
    bool best_is_pid = false;
    struct timespec best_t = {0, 0};
    struct dirent *e;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "heap.%ld.", (long)pid);
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "heap.", 5) != 0 || len < 11 ||
            strcmp(e->d_name + len - 6, ".pb.gz") != 0 ||
            (len > 11 && strcmp(e->d_name + len - 11, ".peak.pb.gz") == 0))
            continue; /* reports only: a peak profile goes with its report */
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || st.st_mtime < since)
            continue;
        count++;
        bool is_pid = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
        unsigned seq = is_pid ? (unsigned)strtoul(e->d_name + strlen(prefix), NULL, 10) : 0;
        bool newer = st.st_mtim.tv_sec > best_t.tv_sec ||
                     (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec);
        if ((is_pid && (!best_is_pid || seq >= best_seq)) || (!is_pid && !best_is_pid && newer)) {
            snprintf(best, sizeof best, "%s", e->d_name);
            best_is_pid = is_pid;
            best_seq = seq;
            best_t = st.st_mtim;
        }
    }
    closedir(d);
    if (quiet)
        return;
    if (count == 0)
        fprintf(stderr, "mimprof: no profile written to %s\n", dir);
    else
        fprintf(stderr, "mimprof: %u profile%s in %s; last: %s/%s\n", count, count == 1 ? "" : "s",
                dir, dir, best);
}

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

static int run_command(run_opts *op, char **cmd);

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
        O_HTTP_WILDCARD
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
                  .follow_exec = -1};
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
        case ':':
            fprintf(stderr, "mimprof run: option '%s' needs a value\n", argv[optind - 1]);
            return EXIT_OWN_ERROR;
        default:
            fprintf(stderr, "mimprof run: unknown option '%s' (see mimprof run --help)\n",
                    argv[optind - 1]);
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

    return run_command(&o, argv + optind);
}

static int run_command(run_opts *op, char **cmd)
{
    run_opts o = *op; /* (its secrets stay in *op's buffers) */
    char preload[PATH_MAX], looked[4096], object[64];
    /* --dormant: the object whose malloc and free stay the provider's own
     * until a session starts (preload/preload.c). */
    snprintf(object, sizeof object, "%s%s", o.allocator, o.dormant ? "-dormant" : "");
    if (find_preload(object, preload, sizeof preload, looked, sizeof looked) != 0) {
        fprintf(stderr,
                "mimprof run: cannot find libmimprof-preload-%s.so (looked in: %s; "
                "set MIMPROF_PRELOAD_DIR, or build with the %s provider)\n",
                object, looked, o.allocator);
        return EXIT_OWN_ERROR;
    }
    const char *server = getenv("PYROSCOPE_SERVER_ADDRESS");
    o.pyro = o.pyro_url != NULL || (server != NULL && server[0] != '\0');
    if (!o.pyro && (o.pyro_app != NULL || o.pyro_ntags > 0 || o.pyro_tenant != NULL ||
                    o.pyro_basic != NULL || o.pyro_bearer != NULL || o.pyro_protocol != NULL)) {
        fprintf(stderr,
                "mimprof run: --app, --tag, --tenant, --basic-auth, --bearer-token and "
                "--pyroscope-protocol need --pyroscope URL (or PYROSCOPE_SERVER_ADDRESS)\n");
        return EXIT_OWN_ERROR;
    }
    if (o.pyro_basic != NULL && o.pyro_bearer != NULL) {
        fprintf(stderr, "mimprof run: --basic-auth and --bearer-token exclude each other\n");
        return EXIT_OWN_ERROR;
    }
    if (o.pyro && setup_pyroscope(&o, preload) != 0)
        return EXIT_OWN_ERROR;
    /* Uploading: files only with -o. */
    bool files = !o.pyro || o.out_given;
    char abs_dir[PATH_MAX];
    if (files && (mpt_mkdir_dir(o.out_dir) != 0 || realpath(o.out_dir, abs_dir) == NULL ||
                  mpt_dir_writable(abs_dir) != 0)) {
        fprintf(stderr, "mimprof run: cannot use output directory %s: %s\n", o.out_dir,
                strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (build_env(&o, preload, files ? abs_dir : NULL) != 0) {
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (image_env(&o) != 0)
        return EXIT_OWN_ERROR;

    char status_dir[4096];
    status_dir_make(status_dir, sizeof status_dir);
    /* exec failures travel back through a close-on-exec pipe. */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        status_dir_print(status_dir);
        fprintf(stderr, "mimprof run: pipe: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    /* Signals: set up before the fork so none is missed; the child
     * restores the defaults before exec. */
    static const int fwd[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa, saved[sizeof fwd / sizeof fwd[0]];
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigset_t block, oldmask;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&block, fwd[i]);
    sigprocmask(SIG_BLOCK, &block, &oldmask);
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaction(fwd[i], &sa, &saved[i]);
    time_t started = time(NULL);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        status_dir_print(status_dir);
        fprintf(stderr, "mimprof run: fork: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (pid == 0) {
        for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
            sigaction(fwd[i], &saved[i], NULL);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        close(pfd[0]);
        /* The process the runtime profiles: this one, also once an exec
         * replaced it; programs other processes execute are governed by
         * MIMPROF_FOLLOW_EXEC (runtime/rt_env.h). */
        char root[32];
        snprintf(root, sizeof root, "%ld", (long)getpid());
        if (setenv("MIMPROF_ROOT_PID", root, 1) != 0)
            _exit(EXIT_OWN_ERROR);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(EXIT_CANNOT_RUN);
    }
    g_child = pid;
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    close(pfd[1]);
    int exec_errno = 0;
    ssize_t r;
    while ((r = read(pfd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "mimprof run: waitpid: %s\n", strerror(errno));
            return EXIT_OWN_ERROR;
        }
    }
    g_child = 0;
    status_dir_print(status_dir);
    if (r == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "mimprof run: cannot run '%s': %s\n", cmd[0], strerror(exec_errno));
        return EXIT_CANNOT_RUN;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "mimprof run: '%s' was killed by signal %d (%s)%s\n", cmd[0], sig,
                strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
        if (files)
            summarize(abs_dir, started, pid, false);
        return 128 + sig;
    }
    if (files)
        summarize(abs_dir, started, pid, o.quiet);
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_OWN_ERROR;
}
