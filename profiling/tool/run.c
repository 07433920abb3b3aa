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
 * Extension point (issue 7, the Pyroscope adapter): upload options
 * (server URL, auth, tenant, labels) will be added to `run_opts` and
 * passed as MIMPROF_PYROSCOPE_* variables in build_env(); the runtime
 * hands each report to the adapter next to the file writer. No such
 * option exists yet.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "units.h"
#include "views.h"

#ifndef MPT_PRELOAD_BUILD_REL
#define MPT_PRELOAD_BUILD_REL "../preload"
#endif
#ifndef MPT_PRELOAD_INSTALL_REL
#define MPT_PRELOAD_INSTALL_REL "../lib"
#endif

enum { EXIT_CANNOT_RUN = 127, EXIT_OWN_ERROR = 125 };

typedef struct run_opts {
    uint64_t interval;      /* 0: the preload's default */
    const char *allocator;  /* mimalloc | jemalloc */
    const char *every;      /* as given, validated */
    uint64_t every_ms;
    const char *out_dir;
    const char *symbolize;  /* none | functions | lines */
    const char *seed;
    const char *max_depth;
    int follow_fork;        /* -1: default (yes) */
    int follow_exec;        /* -1: default (no) */
    bool quiet;
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

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
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
    rc |= setenv("MIMPROF_OUTPUT", abs_dir, 1);
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
        rc |= setenv("MIMPROF_MAX_DEPTH", o->max_depth, 1);
    rc |= setenv("MIMPROF_FOLLOW_FORK", o->follow_fork == 0 ? "0" : "1", 1);
    rc |= setenv("MIMPROF_FOLLOW_EXEC", o->follow_exec == 1 ? "1" : "0", 1);
    if (o->quiet)
        rc |= setenv("MIMPROF_QUIET", "1", 1);
    return rc == 0 ? 0 : -1;
}

/* Counts the reports in dir newer than `since` and names the newest one
 * of `pid` (or of any process when none of pid's exists). */
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
            strcmp(e->d_name + len - 6, ".pb.gz") != 0)
            continue;
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

int mpt_cmd_run(int argc, char **argv)
{
    enum { O_FF = 256, O_NFF, O_FE, O_NFE, O_SEED, O_DEPTH };
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const allocators[] = {"mimalloc", "jemalloc", NULL};
    static const char *const symbolizers[] = {"none", "functions", "lines", NULL};
    /* --symbolize functions by default: DWARF line tables (`lines`) cost a
     * one-off ~0.2-1 s per process where separate debug info is installed
     * (BENCHMARKS.md), and the views only need function names. */
    run_opts o = {.allocator = "mimalloc", .every = "10s", .every_ms = 10000,
                  .out_dir = "mimprof-out", .symbolize = "functions", .follow_fork = -1,
                  .follow_exec = -1};
    int c;
    optind = 1;
    opterr = 0;
    /* '+': options end at the command. */
    while ((c = getopt_long(argc, argv, "+:i:a:e:o:s:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (!mpt_parse_size(optarg, &o.interval) || o.interval == 0 ||
                o.interval > ((uint64_t)1 << 40)) {
                fprintf(stderr, "mimprof run: --interval wants a size like 512k or 1m (1 B..1 TiB), not '%s'\n", optarg);
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
                fprintf(stderr, "mimprof run: --every wants a duration like 10s, 500ms or 0, not '%s'\n", optarg);
                return EXIT_OWN_ERROR;
            }
            o.every = optarg;
            break;
        case 'o':
            o.out_dir = optarg;
            break;
        case 's':
            if (parse_flag_value("--symbolize", optarg, symbolizers) < 0)
                return EXIT_OWN_ERROR;
            o.symbolize = optarg;
            break;
        case O_FF: o.follow_fork = 1; break;
        case O_NFF: o.follow_fork = 0; break;
        case O_FE: o.follow_exec = 1; break;
        case O_NFE: o.follow_exec = 0; break;
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
            if (*end != '\0' || d == 0 || d > 512) {
                fprintf(stderr, "mimprof run: --max-depth wants 1..512, not '%s'\n", optarg);
                return EXIT_OWN_ERROR;
            }
            o.max_depth = optarg;
            break;
        }
        case 'q':
            o.quiet = true;
            break;
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
    if (optind >= argc) {
        fprintf(stderr, "mimprof run: no command to run (mimprof run [options] -- CMD [ARGS...])\n");
        return EXIT_OWN_ERROR;
    }
    char **cmd = argv + optind;

    char preload[PATH_MAX], looked[4096];
    if (find_preload(o.allocator, preload, sizeof preload, looked, sizeof looked) != 0) {
        fprintf(stderr, "mimprof run: cannot find libmimprof-preload-%s.so (looked in: %s; "
                        "set MIMPROF_PRELOAD_DIR, or build with the %s provider)\n",
                o.allocator, looked, o.allocator);
        return EXIT_OWN_ERROR;
    }
    char abs_dir[PATH_MAX];
    if (mkdir_p(o.out_dir) != 0 || realpath(o.out_dir, abs_dir) == NULL) {
        fprintf(stderr, "mimprof run: cannot use output directory %s: %s\n", o.out_dir,
                strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (build_env(&o, preload, abs_dir) != 0) {
        fprintf(stderr, "mimprof run: cannot set the environment: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }

    /* exec failures travel back through a close-on-exec pipe. */
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
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
        fprintf(stderr, "mimprof run: fork: %s\n", strerror(errno));
        return EXIT_OWN_ERROR;
    }
    if (pid == 0) {
        for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
            sigaction(fwd[i], &saved[i], NULL);
        sigprocmask(SIG_SETMASK, &oldmask, NULL);
        close(pfd[0]);
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
    if (r == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "mimprof run: cannot run '%s': %s\n", cmd[0], strerror(exec_errno));
        return EXIT_CANNOT_RUN;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "mimprof run: '%s' was killed by signal %d (%s)%s\n", cmd[0], sig,
                strsignal(sig), WCOREDUMP(status) ? ", core dumped" : "");
        summarize(abs_dir, started, pid, false);
        return 128 + sig;
    }
    summarize(abs_dir, started, pid, o.quiet);
    return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_OWN_ERROR;
}
