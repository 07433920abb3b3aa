/* The preload runtime: environment -> session, reporter thread, gzip
 * files, Pyroscope uploads, signals, fork and exec (see preload_runtime.h
 * for the contract).
 *
 * Threads: the reporter thread is the only one that calls
 * mp_profiler_report() (and, at the end, the thread running exit handlers,
 * after it has joined the reporter). Signal handlers only post a
 * semaphore and set atomic flags. The Pyroscope agent (a sink of
 * libmimprof-pyroscope, dlopen()ed) is used by the same threads, in the
 * same order: started at the first report, fed by every report, stopped
 * after the last one.
 */
#define _GNU_SOURCE
#include "preload_runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <mimprof/profiling.h>

#include "fsutil.h"
#include "image_runtime.h"
#include "pyro_api.h"
#include "rt_common.h"
#include "rt_signals.h"
#include "units.h"

/* Fatal signals whose default action ends the process: a last report is
 * attempted when the program did not set a handler of its own. */
static const int FATAL_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                                    SIGSEGV, SIGBUS, SIGFPE, SIGILL};
enum { NFATAL = sizeof FATAL_SIGNALS / sizeof FATAL_SIGNALS[0] };

static struct {
    pthread_mutex_t lock; /* start / stop / fork */
    bool started;         /* a session is running in this process */
    mp_profiler *prof;
    mp_prof_config cfg;
    char dir[4096];     /* directory mode: the directory; else "" */
    char pattern[4096]; /* pattern mode: the absolute pattern */
    bool gzip;
    uint64_t every_ms;
    bool follow_fork;
    bool quiet;
    pid_t pid;    /* the process that owns the session */
    unsigned seq; /* next file number */
    pthread_t reporter;
    bool have_reporter;
    sem_t wake;
    atomic_bool stop_req;
    atomic_bool report_req;
    atomic_int fatal_sig;     /* a fatal signal waits for its report */
    atomic_uint reports_done; /* bumped after every report attempt */
    bool files;               /* reports are written (rt.dir or rt.pattern) */
    /* Pyroscope: reports are also handed to a sink agent. */
    bool pyro_on;           /* configured: upload every report */
    bool pyro_failed;       /* the agent could not start: reports go nowhere */
    bool pyro_summary;      /* a line at exit even when nothing was lost */
    bool pyro_forked;       /* this process is a forked child of the configured one */
    int64_t window_from_ns; /* `from` of the next report's window (wall clock) */
    uint64_t pyro_unsent;   /* reports never handed to the agent */
    char pyro_app[128];     /* service_name, for the summary line */
    char status_dir[4096];  /* MIMPROF_STATUS_DIR: where the summary goes, or "" */
#if MPT_HAVE_PYROSCOPE
    mpt_pyro_api pyro_api;
    mp_pyro_config *pyro_cfg; /* validated at start; copied by each agent */
    mp_pyro_agent *pyro;      /* started at the first report */
#endif
} rt = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Messages on stderr, unless MIMPROF_QUIET. */
#define say(...) mpt_rt_say(rt.quiet, __VA_ARGS__)

/* ---- gzip into mmap()ed memory ---------------------------------------- */

/* zlib's allocator: mmap, so the runtime's buffers never pass through the
 * malloc the profiler samples. A size header precedes each block. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    size_t n = (size_t)items * size + 16;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return Z_NULL;
    *(size_t *)p = n;
    return (char *)p + 16;
}

static void z_free(voidpf opaque, voidpf address)
{
    (void)opaque;
    if (address != Z_NULL) {
        char *p = (char *)address - 16;
        munmap(p, *(size_t *)p);
    }
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* gzip-compresses buf into fd. */
static int gzip_to_fd(int fd, const uint8_t *buf, size_t len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = z_alloc;
    zs.zfree = z_free;
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    enum { CHUNK = 1 << 18 };
    uint8_t *out = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (out == MAP_FAILED) {
        deflateEnd(&zs);
        return -1;
    }
    int rc = 0, z;
    size_t off = 0;
    do {
        if (zs.avail_in == 0 && off < len) {
            size_t chunk = len - off > (1u << 30) ? (1u << 30) : len - off;
            zs.next_in = (Bytef *)(uintptr_t)(buf + off);
            zs.avail_in = (uInt)chunk;
            off += chunk;
        }
        zs.next_out = out;
        zs.avail_out = CHUNK;
        z = deflate(&zs, off == len ? Z_FINISH : Z_NO_FLUSH);
        if (z == Z_STREAM_ERROR) {
            rc = -1;
            break;
        }
        if (write_all(fd, out, CHUNK - zs.avail_out) != 0) {
            rc = -1;
            break;
        }
    } while (z != Z_STREAM_END);
    deflateEnd(&zs);
    munmap(out, CHUNK);
    return rc;
}

/* ---- reports --------------------------------------------------------- */

/* The file of report `seq`: DIR/heap.<pid>.<seq>.pb.gz, or the pattern
 * with %p, %n, %t and %% expanded. */
static int expand_path(char *dst, size_t cap, unsigned seq)
{
    if (rt.dir[0] != '\0') {
        int n = snprintf(dst, cap, "%s/heap.%ld.%u.pb.gz", rt.dir, (long)rt.pid, seq);
        return n > 0 && (size_t)n < cap ? 0 : -1;
    }
    size_t o = 0;
    for (const char *s = rt.pattern; *s; s++) {
        char piece[32] = {s[0], 0};
        if (s[0] == '%' && s[1] != '\0') {
            s++;
            if (*s == 'p')
                snprintf(piece, sizeof piece, "%ld", (long)rt.pid);
            else if (*s == 'n')
                snprintf(piece, sizeof piece, "%u", seq);
            else if (*s == 't')
                snprintf(piece, sizeof piece, "%lld", (long long)time(NULL));
            else if (*s == '%')
                piece[0] = '%';
            else {
                piece[0] = '%';
                piece[1] = *s;
                piece[2] = '\0';
            }
        }
        size_t l = strlen(piece);
        if (o + l >= cap)
            return -1;
        memcpy(dst + o, piece, l);
        o += l;
    }
    dst[o] = '\0';
    return 0;
}

static void pyro_submit(const uint8_t *buf, size_t len, int64_t from_ns, int64_t until_ns);

static int64_t now_real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Takes one report, hands it to the Pyroscope agent and writes it (see
 * expand_path). Called by the reporter thread, or by the exit path after
 * the reporter is gone. */
static void report_once(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report(rt.prof, &buf, &len);
    if (st != MP_PROF_OK) {
        say("mimprof: report failed: %s\n", mp_prof_strerror(st));
        return;
    }
    /* Windows are contiguous: each report's interval values (alloc_*)
     * cover exactly [previous report, now). */
    int64_t now = now_real_ns();
    if (rt.pyro_on)
        pyro_submit(buf, len, rt.window_from_ns, now);
    rt.window_from_ns = now;
    if (!rt.files) {
        mp_prof_buffer_free(buf);
        return;
    }
    char path[4200], tmp[4300];
    unsigned seq = rt.seq++;
    if (expand_path(path, sizeof path, seq) != 0) {
        say("mimprof: report path too long\n");
        mp_prof_buffer_free(buf);
        return;
    }
    /* The temporary file sits next to the target (same file system). */
    const char *slash = strrchr(path, '/');
    int dlen = slash != NULL ? (int)(slash - path) : 0;
    snprintf(tmp, sizeof tmp, "%.*s/.%s.tmp", dlen, path, slash != NULL ? slash + 1 : path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        say("mimprof: cannot write %s: %s\n", tmp, strerror(errno));
    } else {
        int rc = rt.gzip ? gzip_to_fd(fd, buf, len) : write_all(fd, buf, len);
        if (close(fd) != 0)
            rc = -1;
        if (rc == 0 && rename(tmp, path) == 0) {
            /* written */
        } else {
            say("mimprof: cannot write %s: %s\n", path, strerror(errno));
            unlink(tmp);
        }
    }
    mp_prof_buffer_free(buf);
}

/* ---- Pyroscope ------------------------------------------------------- */

/* The value the runtime gives MIMPROF_DISABLE: it owns the session, the
 * preload's constructor must not start one. Unlike a user's "1" it does
 * not stop a program this process executes from uploading. */
#define DISABLE_MARK "runtime"

static bool env_flag(const char *name, bool dflt);

#if MPT_HAVE_PYROSCOPE
/* Loads libmimprof-pyroscope: $MIMPROF_PYROSCOPE_LIB (mimprof run sets
 * it to the file it validated the flags with), else the file next to this
 * preload object (an install prefix's libdir), else the dynamic loader's
 * search (LD_LIBRARY_PATH, ld.so.cache, this object's RUNPATH). */
static bool pyro_load(char *err, size_t errlen)
{
    const char *lib = getenv("MIMPROF_PYROSCOPE_LIB");
    if (lib != NULL && lib[0] != '\0')
        return mpt_pyro_open(lib, false, &rt.pyro_api, err, errlen);
    Dl_info info;
    if (dladdr(&rt, &info) != 0 && info.dli_fname != NULL && strrchr(info.dli_fname, '/') != NULL) {
        char cand[4200];
        int dlen = (int)(strrchr(info.dli_fname, '/') - info.dli_fname);
        snprintf(cand, sizeof cand, "%.*s/%s", dlen, info.dli_fname, MPT_PYRO_SONAME);
        if (access(cand, R_OK) == 0)
            return mpt_pyro_open(cand, false, &rt.pyro_api, err, errlen);
    }
    return mpt_pyro_open(MPT_PYRO_SONAME, false, &rt.pyro_api, err, errlen);
}
#endif

/* PYROSCOPE_SERVER_ADDRESS is set: loads the adapter and builds, checks and
 * keeps the agents' configuration (PYROSCOPE_*, MIMPROF_PYROSCOPE_*, read
 * by mp_pyro_config_from_env). rt.lock held, at start, before the
 * runtime's variables are removed. 1: uploading; -1: not (said why). */
static int pyro_setup(void)
{
#if MPT_HAVE_PYROSCOPE
    char err[600];
    if (!pyro_load(err, sizeof err)) {
        say("mimprof: pyroscope: cannot load libmimprof-pyroscope: %s; not uploading\n", err);
        return -1;
    }
    const mpt_pyro_api *api = &rt.pyro_api;
    mp_pyro_config *cfg = NULL;
    mp_pyro_status st = api->config_new(&cfg);
    if (st == MP_PYRO_OK)
        st = api->config_from_env(cfg);
    const char *level = getenv("MIMPROF_PYROSCOPE_LOG_LEVEL");
    if (st == MP_PYRO_OK && rt.quiet && (level == NULL || level[0] == '\0'))
        st = api->config_set_logger(cfg, MP_PYRO_LOG_ERROR, NULL, NULL);
    if (st == MP_PYRO_OK)
        st = api->config_validate(cfg);
    if (st != MP_PYRO_OK) {
        const char *app = getenv("PYROSCOPE_APPLICATION_NAME");
        const char *why = cfg != NULL ? api->config_error(cfg) : "";
        if (st == MP_PYRO_E_NOT_CONFIGURED && (app == NULL || app[0] == '\0'))
            why = "PYROSCOPE_APPLICATION_NAME is not set";
        say("mimprof: pyroscope: %s; not uploading\n",
            why != NULL && why[0] != '\0' ? why : api->strerror(st));
        api->config_free(cfg);
        mpt_pyro_close(&rt.pyro_api);
        return -1;
    }
    rt.pyro_cfg = cfg;
    snprintf(rt.pyro_app, sizeof rt.pyro_app, "%s", getenv("PYROSCOPE_APPLICATION_NAME"));
    rt.pyro_summary = env_flag("MIMPROF_PYROSCOPE_SUMMARY", false);
    rt.pyro_on = true;
    return 1;
#else
    say("mimprof: PYROSCOPE_SERVER_ADDRESS is set, but this preload was built without "
        "Pyroscope support (no <mimprof/pyroscope.h>); not uploading\n");
    return -1;
#endif
}

#if MPT_HAVE_PYROSCOPE
/* Starts this process's sink agent (at its first report, so that a child
 * that only forks and executes never starts one). Its threads are created
 * with every signal blocked: signals stay with the program's threads. */
static void pyro_start_agent(void)
{
    const mpt_pyro_api *api = &rt.pyro_api;
    mp_pyro_status st = MP_PYRO_OK;
    if (rt.pyro_forked) /* the parent holds the spool directory's lock */
        st = api->config_set_spool(rt.pyro_cfg, NULL, 0, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (st == MP_PYRO_OK)
        st = api->agent_start(rt.pyro_cfg, NULL, &rt.pyro);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != MP_PYRO_OK) {
        rt.pyro = NULL;
        rt.pyro_failed = true;
        say("mimprof: pyroscope: not uploading from pid %ld: %s\n", (long)getpid(),
            api->strerror(st));
    }
}
#endif

/* Hands one report to the agent (copied and gzipped there; the upload runs
 * on the agent's thread and never blocks this one). */
static void pyro_submit(const uint8_t *buf, size_t len, int64_t from_ns, int64_t until_ns)
{
#if MPT_HAVE_PYROSCOPE
    if (rt.pyro == NULL && !rt.pyro_failed)
        pyro_start_agent();
    if (rt.pyro != NULL &&
        rt.pyro_api.agent_submit(rt.pyro, buf, len, from_ns, until_ns) == MP_PYRO_OK)
        return;
    if (len > 0)
        rt.pyro_unsent++;
#else
    (void)buf;
    (void)len;
    (void)from_ns;
    (void)until_ns;
#endif
}

/* The upload summary of this process: a file in the private directory
 * `mimprof run` made for it (MIMPROF_STATUS_DIR), which the command prints
 * after the program ended -- whatever the program did with its
 * descriptors, nothing is lost silently -- else (a bare preload, or the
 * directory is gone) a message on the runtime's own descriptor. */
#define status_say(...) mpt_rt_say_to(rt.quiet, status_path(), __VA_ARGS__)

/* pyroscope.<pid> in rt.status_dir, or NULL. */
static const char *status_path(void)
{
    static char path[4200];
    if (rt.status_dir[0] == '\0')
        return NULL;
    snprintf(path, sizeof path, "%s/pyroscope.%ld", rt.status_dir, (long)getpid());
    return path;
}

/* After the last report: stops the agent, which delivers what is queued
 * within its flush deadline (MIMPROF_PYROSCOPE_FLUSH_DEADLINE, default 5 s)
 * and spools or counts the rest; then one line on stderr when anything was
 * lost, spooled or failed on the way (or, when `mimprof run` asked for it,
 * that everything was uploaded). No more uploads from this process. */
static void pyro_finish(void)
{
#if MPT_HAVE_PYROSCOPE
    if (!rt.pyro_on)
        return;
    rt.pyro_on = false;
    const mpt_pyro_api *api = &rt.pyro_api;
    mp_pyro_stats st;
    memset(&st, 0, sizeof st);
    char last[400] = "";
    if (rt.pyro != NULL) {
        api->agent_stop(rt.pyro);
        api->agent_stats(rt.pyro, &st);
        api->agent_last_error(rt.pyro, last, sizeof last);
        api->agent_free(rt.pyro);
        rt.pyro = NULL;
    }
    typedef unsigned long long ull;
    ull lost = st.dropped_queue_full + st.dropped_rejected + st.dropped_retry_exhausted +
               st.dropped_stop_deadline + st.dropped_spool_io + st.reports_failed + rt.pyro_unsent;
    ull total = st.reports_queued + st.reports_failed + rt.pyro_unsent;
    ull failed = st.fail_connect + st.fail_timeout + st.fail_tls + st.fail_rate_limited +
                 st.fail_server + st.fail_rejected + st.fail_other;
    if (lost > 0 || st.spooled > 0 || failed > 0)
        status_say(
            "mimprof: pyroscope: pid %ld: %llu of %llu profiles uploaded, %llu lost (queue full "
            "%llu, rejected %llu, retries exhausted %llu, stop deadline %llu, spool i/o %llu, "
            "not queued %llu), %llu spooled; failed requests: connect %llu, timeout %llu, "
            "tls %llu, 429 %llu, 5xx %llu, rejected %llu, other %llu%s%s\n",
            (long)getpid(), (ull)st.uploaded, total, lost, (ull)st.dropped_queue_full,
            (ull)st.dropped_rejected, (ull)st.dropped_retry_exhausted,
            (ull)st.dropped_stop_deadline, (ull)st.dropped_spool_io,
            (ull)(st.reports_failed + rt.pyro_unsent), (ull)st.spooled, (ull)st.fail_connect,
            (ull)st.fail_timeout, (ull)st.fail_tls, (ull)st.fail_rate_limited, (ull)st.fail_server,
            (ull)st.fail_rejected, (ull)st.fail_other, last[0] != '\0' ? "; last error: " : "",
            last);
    else if (rt.pyro_summary && !rt.pyro_forked)
        status_say("mimprof: pyroscope: pid %ld: %llu profile%s uploaded (service_name=%s)\n",
                   (long)getpid(), (ull)st.uploaded, st.uploaded == 1 ? "" : "s", rt.pyro_app);
#endif
}

/* In a forked child: the parent's agent is forgotten, not stopped (its
 * threads do not exist here and its lock may be held); the child starts
 * its own at its first report. */
static void pyro_after_fork(void)
{
#if MPT_HAVE_PYROSCOPE
    rt.pyro = NULL;
#endif
    rt.pyro_failed = false;
    rt.pyro_unsent = 0;
    rt.pyro_forked = true;
}

/* ---- the reporter thread --------------------------------------------- */

static void *reporter_main(void *arg)
{
    (void)arg;
    /* Signals are for the application's threads; this one only waits. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    struct timespec next;
    clock_gettime(CLOCK_REALTIME, &next);
    if (rt.pyro_on && rt.every_ms > 0) {
        /* Uploads on wall-clock multiples of the period, like Pyroscope's
         * own agents (the first window is shorter). */
        int64_t now_ms = (int64_t)next.tv_sec * 1000 + next.tv_nsec / 1000000;
        int64_t at = (now_ms / (int64_t)rt.every_ms + 1) * (int64_t)rt.every_ms;
        next.tv_sec = (time_t)(at / 1000);
        next.tv_nsec = (long)(at % 1000) * 1000000L;
    } else {
        mpt_rt_timespec_add_ms(&next, rt.every_ms);
    }
    for (;;) {
        int r = mpt_rt_wait(&rt.wake, rt.every_ms > 0 ? &next : NULL);
        if (atomic_load(&rt.stop_req)) {
            /* A report asked for (SIGUSR2) and not taken yet is taken
             * now: the exit that follows a request never drops it. */
            if (atomic_exchange(&rt.report_req, false)) {
                report_once();
                atomic_fetch_add(&rt.reports_done, 1);
            }
            break;
        }
        bool timed_out = r != 0;
        if (timed_out) {
            /* The next period starts from the deadline; after a stall
             * (suspended process) from now, without catching up. */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            mpt_rt_timespec_add_ms(&next, rt.every_ms);
            if (now.tv_sec > next.tv_sec) {
                next = now;
                mpt_rt_timespec_add_ms(&next, rt.every_ms);
            }
        }
        bool asked = atomic_exchange(&rt.report_req, false);
        int fatal = atomic_load(&rt.fatal_sig);
        if (!timed_out && !asked && fatal == 0)
            continue; /* a stale post */
        report_once();
        if (fatal != 0)
            pyro_finish(); /* the waiting handler gives up after 2 s */
        atomic_fetch_add(&rt.reports_done, 1);
        if (fatal != 0)
            break; /* the process is about to die: no more reports */
    }
    return NULL;
}

void mp_preload_runtime_request(void)
{
    mp_image_rt_request(); /* MIMPROF_IMAGE: a heap image too (image_runtime.h) */
    atomic_store(&rt.report_req, true);
    sem_post(&rt.wake);
}

static void on_usr2(int sig)
{
    (void)sig;
    int saved = errno;
    mp_preload_runtime_request();
    errno = saved;
}

/* Asks the reporter for a last report and waits for it at most 2 s.
 * Async-signal-safe: a flag, a semaphore post and nanosleep. The reporter
 * may be blocked by a lock the calling thread holds (a crash inside
 * malloc): then the wait times out and the process goes on dying. Not in
 * the reporter itself, not in another process (a vfork child shares this
 * memory). */
static void last_report(int why)
{
    if (!rt.started || !rt.have_reporter || getpid() != rt.pid ||
        pthread_equal(pthread_self(), rt.reporter))
        return;
    unsigned before = atomic_load(&rt.reports_done);
    int expected = 0;
    if (!atomic_compare_exchange_strong(&rt.fatal_sig, &expected, why))
        return;
    sem_post(&rt.wake);
    for (int i = 0; i < 200 && atomic_load(&rt.reports_done) == before; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void on_fatal(int sig)
{
    int saved = errno;
    last_report(sig);
    /* SA_RESETHAND restored the default action; the re-raised signal is
     * delivered when this handler returns. */
    raise(sig);
    errno = saved;
}

/* _exit() and _Exit() skip atexit handlers; some programs (dash, servers'
 * forked workers) always end that way. The runtime's copies take the last
 * report first, then end the process as glibc's do. exit() is unaffected
 * (glibc calls its internal _exit, after the atexit report). */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    last_report(-1);
    for (;;)
        syscall(SYS_exit_group, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status) { _exit(status); }

/* SIGUSR2 and the fatal signals, each while the program leaves it at its
 * default action; the program keeps seeing its own dispositions
 * (rt_signals.h). */
static void install_handlers(void)
{
    mpt_sig_take(SIGUSR2, on_usr2, SA_RESTART);
    for (size_t i = 0; i < NFATAL; i++)
        mpt_sig_take(FATAL_SIGNALS[i], on_fatal, SA_RESETHAND | SA_RESTART);
}

/* ---- environment ----------------------------------------------------- */

static bool env_flag(const char *name, bool dflt)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return dflt;
    return !(strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0);
}

/* Removes every LD_PRELOAD entry naming this object, so that exec'd
 * programs do not inherit it. */
static void drop_self_from_ld_preload(void)
{
    const char *lp = getenv("LD_PRELOAD");
    if (lp == NULL)
        return;
    char self[4096];
    ssize_t n = -1;
    {
        /* The object that contains this function, by address. */
        FILE *maps = fopen("/proc/self/maps", "re");
        uintptr_t me = (uintptr_t)&drop_self_from_ld_preload;
        char line[4400];
        while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
            unsigned long lo, hi;
            int off = 0;
            if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &off) >= 2 && me >= lo &&
                me < hi && off > 0) {
                char *path = line + off;
                path[strcspn(path, "\n")] = '\0';
                snprintf(self, sizeof self, "%s", path);
                n = (ssize_t)strlen(self);
                break;
            }
        }
        if (maps != NULL)
            fclose(maps);
    }
    if (n <= 0)
        return;
    const char *self_base = strrchr(self, '/') != NULL ? strrchr(self, '/') + 1 : self;
    size_t cap = strlen(lp) + 1;
    char *out = malloc(cap), *copy = strdup(lp);
    if (out == NULL || copy == NULL) {
        free(out);
        free(copy);
        return;
    }
    out[0] = '\0';
    char *save = NULL;
    for (char *tok = strtok_r(copy, ": ", &save); tok != NULL; tok = strtok_r(NULL, ": ", &save)) {
        const char *base = strrchr(tok, '/') != NULL ? strrchr(tok, '/') + 1 : tok;
        char real[4096];
        bool same =
            strcmp(tok, self) == 0 || (strcmp(base, self_base) == 0 &&
                                       realpath(tok, real) != NULL && strcmp(real, self) == 0);
        if (same)
            continue;
        if (out[0] != '\0')
            strcat(out, ":");
        strcat(out, tok);
    }
    if (out[0] == '\0')
        unsetenv("LD_PRELOAD");
    else
        setenv("LD_PRELOAD", out, 1);
    free(out);
    free(copy);
}

/* ---- session lifecycle ----------------------------------------------- */

static void after_fork_child(void);

/* Starts the session and the reporter in this process; rt.lock held. */
static int start_locked(void)
{
    /* The sampling allocator must have served this process at least once
     * (mp_profiler_start checks it): make sure it has. Through a volatile
     * pointer: compilers may delete a free(malloc(n)) pair. */
    void *volatile probe = malloc(1);
    free(probe);
    mp_prof_status st = mp_profiler_start(&rt.cfg, &rt.prof);
    if (st != MP_PROF_OK) {
        say("mimprof: profiling not started in pid %ld: %s\n", (long)getpid(),
            mp_prof_strerror(st));
        return -1;
    }
    rt.pid = getpid();
    rt.seq = rt.dir[0] != '\0' ? mpt_rt_first_free_seq(rt.dir, rt.pid, ".pb.gz") : 0;
    rt.window_from_ns = now_real_ns();
    atomic_store(&rt.stop_req, false);
    atomic_store(&rt.report_req, false);
    atomic_store(&rt.fatal_sig, 0);
    rt.started = true;
    mp_image_rt_start(rt.prof);
    /* Born with every signal blocked: no process-directed signal is ever
     * delivered to it, not even before it could block them itself. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rt.have_reporter = pthread_create(&rt.reporter, NULL, reporter_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rt.have_reporter)
        say("mimprof: no reporter thread in pid %ld: only the final report will be written\n",
            (long)rt.pid);
    return 0;
}

static void after_fork_child(void)
{
    /* The core ended the parent's session in this child; the reporter
     * thread does not exist here. */
    pthread_mutex_init(&rt.lock, NULL);
    mpt_sig_after_fork();
    if (!rt.started)
        return;
    rt.started = false;
    rt.have_reporter = false;
    mp_profiler_free(rt.prof); /* inactive in the child: only releases the handle */
    rt.prof = NULL;
    sem_destroy(&rt.wake);
    sem_init(&rt.wake, 0, 0);
    atomic_store(&rt.reports_done, 0);
    if (rt.pyro_on)
        pyro_after_fork();
    mp_image_rt_after_fork();
    if (rt.follow_fork)
        start_locked();
}

/* MIMPROF_OUTPUT -> rt.dir (directory mode) or rt.pattern, absolute. */
static int set_output(const char *v)
{
    if (v == NULL || v[0] == '\0')
        v = "mimprof-out/";
    char abs[4096], cwd[4096];
    if (v[0] == '/') {
        if (snprintf(abs, sizeof abs, "%s", v) >= (int)sizeof abs)
            return -1;
    } else {
        if (getcwd(cwd, sizeof cwd) == NULL ||
            snprintf(abs, sizeof abs, "%s/%s", cwd, v) >= (int)sizeof abs)
            return -1;
    }
    size_t len = strlen(abs);
    struct stat st;
    bool dir = abs[len - 1] == '/' || (stat(abs, &st) == 0 && S_ISDIR(st.st_mode));
    if (dir) {
        while (len > 1 && abs[len - 1] == '/')
            abs[--len] = '\0';
        if (mpt_mkdir_p(abs) != 0)
            return -1;
        memcpy(rt.dir, abs, len + 1);
        rt.gzip = true;
    } else {
        memcpy(rt.pattern, abs, len + 1);
        rt.gzip = len > 3 && strcmp(abs + len - 3, ".gz") == 0;
    }
    return 0;
}

int mp_preload_runtime_start(void)
{
    static bool once;
    static int result;
    /* Runtime mode: MIMPROF_EVERY (mimprof run), or PYROSCOPE_SERVER_ADDRESS
     * (a bare preload uploading to Pyroscope) unless the user asked for the
     * allocator only. */
    const char *every = getenv("MIMPROF_EVERY");
    const char *addr = getenv("PYROSCOPE_SERVER_ADDRESS");
    bool pyro = addr != NULL && addr[0] != '\0';
    const char *dis = getenv("MIMPROF_DISABLE");
    bool disabled = dis != NULL && strcmp(dis, "0") != 0;
    if (every == NULL && (!pyro || (disabled && strcmp(dis, DISABLE_MARK) != 0)))
        return 0;
    pthread_mutex_lock(&rt.lock);
    if (once) {
        pthread_mutex_unlock(&rt.lock);
        return result;
    }
    once = true;
    mpt_rt_msg_init(); /* before any message */
    /* The runtime owns the session of this process: the preload's own
     * constructor (which runs after this one) must not start another. */
    if (!disabled)
        setenv("MIMPROF_DISABLE", DISABLE_MARK, 1);
    rt.quiet = env_flag("MIMPROF_QUIET", false);
    const char *sd = getenv("MIMPROF_STATUS_DIR");
    if (sd != NULL && sd[0] == '/' && strlen(sd) < sizeof rt.status_dir)
        memcpy(rt.status_dir, sd, strlen(sd) + 1);
    int rc = -1;
    mp_prof_config_init(&rt.cfg);
    uint64_t v;
    const char *s;
    if ((s = getenv("MIMPROF_INTERVAL")) != NULL && s[0] != '\0') {
        if (!mpt_parse_size(s, &v) || v == 0 || v > MP_PROF_MAX_INTERVAL) {
            say("mimprof: MIMPROF_INTERVAL=%s is not a size (e.g. 512k, 1m); profiling disabled\n",
                s);
            goto out;
        }
        rt.cfg.sample_interval_bytes = (size_t)v;
    }
    rt.every_ms = 10000;
    if (every != NULL && every[0] != '\0' && !mpt_parse_duration_ms(every, &rt.every_ms)) {
        say("mimprof: MIMPROF_EVERY=%s is not a duration (e.g. 10s, 500ms, 0); profiling "
            "disabled\n",
            every);
        goto out;
    }
    /* A bare preload reports at the upload interval (a malformed one is
     * refused by pyro_setup below). */
    if (every == NULL && (s = getenv("PYROSCOPE_UPLOAD_INTERVAL")) != NULL && s[0] != '\0' &&
        (!mpt_parse_duration_ms(s, &rt.every_ms) || rt.every_ms == 0))
        rt.every_ms = 10000;
    if ((s = getenv("MIMPROF_SYMBOLIZE")) != NULL && s[0] != '\0') {
        if (strcmp(s, "none") == 0)
            rt.cfg.symbolize = MP_PROF_SYMBOLIZE_NONE;
        else if (strcmp(s, "functions") == 0)
            rt.cfg.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
        else if (strcmp(s, "lines") == 0)
            rt.cfg.symbolize = MP_PROF_SYMBOLIZE_LINES;
        else {
            say("mimprof: MIMPROF_SYMBOLIZE=%s is not none|functions|lines; profiling disabled\n",
                s);
            goto out;
        }
    }
    if ((s = getenv("MIMPROF_STACK_DEPTH")) != NULL && s[0] != '\0') {
        char *end;
        unsigned long d = strtoul(s, &end, 10);
        if (s[0] < '0' || s[0] > '9' || *end != '\0' || d == 0 || d > 512) {
            say("mimprof: MIMPROF_STACK_DEPTH=%s is not in 1..512; profiling disabled\n", s);
            goto out;
        }
        rt.cfg.max_stack_depth = (unsigned)d;
    }
    if ((s = getenv("MIMPROF_SEED")) != NULL && s[0] != '\0') {
        char *end;
        errno = 0;
        rt.cfg.seed = strtoull(s, &end, 0);
        if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0) {
            say("mimprof: MIMPROF_SEED=%s is not a number; profiling disabled\n", s);
            goto out;
        }
    }
    rt.follow_fork = env_flag("MIMPROF_FOLLOW_FORK", true);
    if (mp_image_rt_configure(rt.quiet) != 0) /* MIMPROF_IMAGE* (image_runtime.h) */
        goto out;
    /* Files: MIMPROF_OUTPUT, default ./mimprof-out/; when uploading, only
     * when MIMPROF_OUTPUT asks for them. */
    const char *output = getenv("MIMPROF_OUTPUT");
    rt.files = !pyro || (output != NULL && output[0] != '\0');
    if (rt.files && set_output(output) != 0) {
        say("mimprof: MIMPROF_OUTPUT=%s is unusable; profiling disabled\n",
            output != NULL ? output : "");
        goto out;
    }
    /* Uploads: without them (a message said why) the runtime goes on with
     * its files, or leaves the process unprofiled when it writes none. */
    if (pyro && pyro_setup() < 0 && !rt.files)
        goto out;
    /* mimprof run does not follow exec by default; a bare preload does
     * (every program of an environment with LD_PRELOAD and PYROSCOPE_*
     * uploads, as the preload alone profiles every program). */
    if (!env_flag("MIMPROF_FOLLOW_EXEC", every == NULL)) {
        /* Programs this process executes run unprofiled: no preload and
         * none of the runtime's variables. PYROSCOPE_* stay: every
         * Pyroscope client reads them (the program may run one). */
        static const char *const vars[] = {"MIMPROF_EVERY",
                                           "MIMPROF_OUTPUT",
                                           "MIMPROF_INTERVAL",
                                           "MIMPROF_SEED",
                                           "MIMPROF_STACK_DEPTH",
                                           "MIMPROF_SYMBOLIZE",
                                           "MIMPROF_FOLLOW_FORK",
                                           "MIMPROF_FOLLOW_EXEC",
                                           "MIMPROF_QUIET",
                                           "MIMPROF_PYROSCOPE_LIB",
                                           "MIMPROF_PYROSCOPE_SUMMARY",
                                           "MIMPROF_PYROSCOPE_PROTOCOL",
                                           "MIMPROF_PYROSCOPE_SPOOL_DIR",
                                           "MIMPROF_PYROSCOPE_CA_PATH",
                                           "MIMPROF_PYROSCOPE_FLUSH_DEADLINE",
                                           "MIMPROF_PYROSCOPE_LOG_LEVEL",
                                           "MIMPROF_IMAGE",
                                           "MIMPROF_IMAGE_EVERY",
                                           "MIMPROF_IMAGE_ON_EXIT",
                                           "MIMPROF_STATUS_DIR",
                                           NULL};
        drop_self_from_ld_preload();
        for (int i = 0; vars[i] != NULL; i++)
            unsetenv(vars[i]);
        /* MIMPROF_DISABLE stays: the preload's constructor, which runs
         * after this one, reads it. */
    }
    sem_init(&rt.wake, 0, 0);
    if (start_locked() != 0)
        goto out;
    pthread_atfork(NULL, NULL, after_fork_child);
    install_handlers();
    atexit(mp_preload_runtime_stop);
    rc = 1;
out:
    result = rc;
    pthread_mutex_unlock(&rt.lock);
    return rc;
}

/* Before the preload's own constructor (default priority): see the
 * header. */
__attribute__((constructor(101))) static void runtime_ctor(void) { mp_preload_runtime_start(); }

void mp_preload_runtime_stop(void)
{
    pthread_mutex_lock(&rt.lock);
    if (!rt.started || rt.pid != getpid()) {
        pthread_mutex_unlock(&rt.lock);
        return;
    }
    if (rt.have_reporter) {
        atomic_store(&rt.stop_req, true);
        sem_post(&rt.wake);
        pthread_join(rt.reporter, NULL);
        rt.have_reporter = false;
    }
    mp_image_rt_stop(true); /* the exit image first: it still holds the interval */
    report_once();
    pyro_finish();
    rt.started = false;
    mp_profiler_free(rt.prof);
    rt.prof = NULL;
    pthread_mutex_unlock(&rt.lock);
}
