/* libmimprof-preload-<provider>.so: the malloc family over the sampling
 * allocator over one provider (MP_PRELOAD_PROVIDER, e.g. mp_sys_mimalloc),
 * for LD_PRELOAD. It starts a profiling session from the environment when
 * it is loaded and writes a final report when the process exits.
 *
 *   LD_PRELOAD=libmimprof-preload-mimalloc.so MIMPROF_INTERVAL=64k \
 *       MIMPROF_OUTPUT=/tmp/prof/ ./program
 *
 * Environment (read once, at load):
 *   MIMPROF_INTERVAL     mean bytes between samples: a number with an
 *                        optional suffix k, m or g (binary: 512k = 524288),
 *                        optionally followed by "b" or "ib" ("64KiB").
 *                        Default 512k.
 *   MIMPROF_OUTPUT       where the report goes. An existing directory, or
 *                        any value ending in '/', means DIR/mimprof.%p.pb;
 *                        anything else is a file name pattern in which %p
 *                        is the process id, %t the Unix time in seconds,
 *                        %n the report's sequence number in this process
 *                        and %% a percent sign. Relative paths are taken
 *                        from the working directory at load time.
 *                        Default: mimprof.%p.pb.
 *   MIMPROF_SEED         sampling seed (0 or unset: random).
 *   MIMPROF_STACK_DEPTH  frames kept per stack (1..512, default 64).
 *   MIMPROF_SYMBOLIZE    none | functions | lines (default: the library's).
 *   MIMPROF_DISABLE      if set and not "0": no session (allocator only).
 * A malformed value is reported on stderr and profiling is disabled; the
 * program runs unchanged either way.
 *
 * The report is uncompressed pprof (gzip it for tools that insist). It
 * holds the allocations of the whole run (alloc_*) and what was still live
 * at exit (inuse_*, i.e. leaks and memory freed only at exit).
 *
 * fork(): the library ends the parent's session in the child. If the
 * output pattern distinguishes processes (%p, or a directory), the child
 * starts its own session and writes its own report at its exit; otherwise
 * the child is not profiled (it would overwrite the parent's file). A
 * program that execs gets a fresh session from the environment.
 */
#define _GNU_SOURCE /* sysconf, dl_iterate_phdr, the glibc malloc prototypes */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>
#include <mimprof/sampling.h>
#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(mp_preload, MP_PRELOAD_PROVIDER);

#define MP_OVERRIDE_PROVIDER mp_preload
#include <mimprof/sys-override.inc.h>

#define OUT_MAX 4096

static mp_profiler *g_prof;
static mp_prof_config g_cfg;
static char g_pattern[OUT_MAX]; /* absolute output pattern */
static bool g_per_process;      /* the pattern names the process (%p or a directory) */
static unsigned g_seq;

static void warn(const char *fmt, const char *a, const char *b)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    if (n > 0)
        (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* "512k", "1m", "64KiB", "4096" -> bytes; 0 on a malformed value. */
static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return 0;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (shift != 0 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v == 0 || v > (ULLONG_MAX >> shift))
        return 0;
    return (size_t)(v << shift);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Builds the absolute output pattern from MIMPROF_OUTPUT. */
static bool set_output(const char *out)
{
    char cwd[OUT_MAX];
    const char *v = (out && *out) ? out : "mimprof.%p.pb";
    size_t len = strlen(v);
    struct stat st;
    bool dir = v[len - 1] == '/' || (stat(v, &st) == 0 && S_ISDIR(st.st_mode));
    char rel[OUT_MAX];
    int n = snprintf(rel, sizeof rel, dir ? "%s%smimprof.%%p.pb" : "%s", v,
                     v[len - 1] == '/' ? "" : "/");
    if (n < 0 || (size_t)n >= sizeof rel)
        return false;
    if (rel[0] == '/') {
        n = snprintf(g_pattern, sizeof g_pattern, "%s", rel);
    } else {
        if (getcwd(cwd, sizeof cwd) == NULL)
            return false;
        n = snprintf(g_pattern, sizeof g_pattern, "%s/%s", cwd, rel);
    }
    if (n < 0 || (size_t)n >= sizeof g_pattern)
        return false;
    g_per_process = strstr(g_pattern, "%p") != NULL;
    return true;
}

static bool expand(char *dst, size_t cap)
{
    size_t o = 0;
    for (const char *s = g_pattern; *s; s++) {
        char tmp[32];
        const char *piece = tmp;
        if (s[0] == '%' && s[1] != '\0') {
            s++;
            switch (*s) {
            case 'p':
                snprintf(tmp, sizeof tmp, "%ld", (long)getpid());
                break;
            case 't':
                snprintf(tmp, sizeof tmp, "%lld", (long long)time(NULL));
                break;
            case 'n':
                snprintf(tmp, sizeof tmp, "%u", g_seq);
                break;
            case '%':
                tmp[0] = '%';
                tmp[1] = '\0';
                break;
            default:
                tmp[0] = '%';
                tmp[1] = *s;
                tmp[2] = '\0';
                break;
            }
        } else {
            tmp[0] = *s;
            tmp[1] = '\0';
        }
        size_t l = strlen(piece);
        if (o + l >= cap)
            return false;
        memcpy(dst + o, piece, l);
        o += l;
    }
    dst[o] = '\0';
    return true;
}

static void write_report(void)
{
    if (g_prof == NULL)
        return;
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_status st = mp_profiler_report(g_prof, &buf, &len);
    if (st != MP_PROF_OK) {
        warn("mimprof: report failed: %s%s\n", mp_prof_strerror(st), "");
        return;
    }
    char path[OUT_MAX];
    if (!expand(path, sizeof path)) {
        warn("mimprof: output path too long: %s%s\n", g_pattern, "");
        mp_prof_buffer_free(buf);
        return;
    }
    g_seq++;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t off = 0;
    while (fd >= 0 && off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (fd < 0 || off != len)
        warn("mimprof: cannot write %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    mp_prof_buffer_free(buf);
}

static void at_exit(void)
{
    write_report();
    mp_profiler_free(g_prof);
    g_prof = NULL;
}

static void start_session(void)
{
    mp_prof_status st = mp_profiler_start(&g_cfg, &g_prof);
    if (st != MP_PROF_OK) {
        g_prof = NULL;
        warn("mimprof: cannot start profiling: %s%s\n", mp_prof_strerror(st), "");
    }
}

static void fork_child(void)
{
    mp_profiler_free(g_prof); /* the library ended it in this child */
    g_prof = NULL;
    g_seq = 0;
    if (g_per_process)
        start_session();
}

/* The whole object is allocator and profiler code: its executable
 * segments are registered as such, so that malloc() and free() themselves
 * never appear as the application's innermost frame. */
static int register_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t me = (uintptr_t)data;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && me >= lo && me < lo + ph->p_memsz)
            mine = true;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            mp_prof_hook_register(lo, lo + ph->p_memsz);
        }
    }
    return 1;
}

__attribute__((constructor)) static void preload_init(void)
{
    dl_iterate_phdr(register_self, (void *)(uintptr_t)&register_self);

    const char *dis = getenv("MIMPROF_DISABLE");
    if (dis != NULL && strcmp(dis, "0") != 0)
        return;
    mp_prof_config_init(&g_cfg);
    const char *v;
    if ((v = getenv("MIMPROF_INTERVAL")) != NULL && *v) {
        size_t n = parse_size(v);
        if (n == 0 || n > MP_PROF_MAX_INTERVAL) {
            warn("mimprof: MIMPROF_INTERVAL=%s is not a size (e.g. 512k, 1m)%s; profiling "
                 "disabled\n",
                 v, "");
            return;
        }
        g_cfg.sample_interval_bytes = n;
    }
    if ((v = getenv("MIMPROF_SEED")) != NULL && *v && !parse_u64(v, &g_cfg.seed)) {
        warn("mimprof: MIMPROF_SEED=%s is not a number%s; profiling disabled\n", v, "");
        return;
    }
    if ((v = getenv("MIMPROF_STACK_DEPTH")) != NULL && *v) {
        uint64_t d;
        if (!parse_u64(v, &d) || d < 1 || d > 512) {
            warn("mimprof: MIMPROF_STACK_DEPTH=%s is not in 1..512%s; profiling disabled\n", v, "");
            return;
        }
        g_cfg.max_stack_depth = (unsigned)d;
    }
    if ((v = getenv("MIMPROF_SYMBOLIZE")) != NULL && *v) {
        if (strcmp(v, "none") == 0)
            g_cfg.symbolize = MP_PROF_SYMBOLIZE_NONE;
        else if (strcmp(v, "functions") == 0)
            g_cfg.symbolize = MP_PROF_SYMBOLIZE_FUNCTIONS;
        else if (strcmp(v, "lines") == 0)
            g_cfg.symbolize = MP_PROF_SYMBOLIZE_LINES;
        else {
            warn(
                "mimprof: MIMPROF_SYMBOLIZE=%s is not none|functions|lines%s; profiling disabled\n",
                v, "");
            return;
        }
    }
    if (!set_output(getenv("MIMPROF_OUTPUT"))) {
        warn("mimprof: MIMPROF_OUTPUT is unusable%s%s; profiling disabled\n", "", "");
        return;
    }
    /* This thread's first allocation initializes it (the "observed" rule).
     * Through the template directly: the compiler may elide free(malloc()). */
    void *volatile first = mp_preload_alloc(16, MP_SYS_NATURAL_ALIGN);
    mp_preload_dealloc(first, 16, MP_SYS_NATURAL_ALIGN);
    start_session();
    if (g_prof != NULL) {
        atexit(at_exit);
        pthread_atfork(NULL, NULL, fork_child);
    }
}
