/* SPDX-License-Identifier: MIT */
/* A profiled program's file descriptors are its own:
 * a daemon-like program that closes every descriptor, reopens 0-2 on
 * /dev/null and opens a data file and a log, then allocates (and is
 * sampled, from stacks the unwinder has not seen) while using them, has
 * exactly the descriptors, file contents and read-backs it has without a
 * session. Regression: libunwind's memory-validation pipe took the
 * numbers the program reopened, read a byte from its data file, wrote a
 * byte of memory into its log, or closed both and put a pipe there. */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mimprof/sys.h>

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tfd, mp_sys_mimalloc);

#define CHILD_CHECK(cond, code)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            _exit(code);                                                                           \
    } while (0)

/* "fd -> target" of every open descriptor but the listing's own, one per
 * line, in descriptor order (the kernel lists them in order). With
 * `strays`, only those above 2 that are below `floor` or lack
 * close-on-exec, the latter marked. */
static void fd_lines(char *out, size_t cap, bool strays, int floor)
{
    out[0] = '\0';
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    int self = dirfd(d);
    size_t o = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == self)
            continue;
        int flags = fcntl(fd, F_GETFD);
        bool cloexec = flags >= 0 && (flags & FD_CLOEXEC);
        if (strays && (fd <= 2 || (fd >= floor && cloexec)))
            continue;
        char link[300], target[512];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        int w = snprintf(out + o, cap - o, "%d -> %s%s\n", fd, target,
                         strays && !cloexec ? " (inherited by exec)" : "");
        if (w > 0 && (size_t)w < cap - o)
            o += (size_t)w;
    }
    closedir(d);
}

static void *volatile sink;

/* Distinct call sites on distinct stack pages: every new return address
 * makes libunwind step (and validate) afresh. */
#define LEVEL(name, next)                                                                          \
    __attribute__((noinline)) static void name(int n, size_t size)                                 \
    {                                                                                              \
        volatile char pad[4500];                                                                   \
        pad[0] = (char)n;                                                                          \
        if (n > 0)                                                                                 \
            next(n - 1, size);                                                                     \
        else {                                                                                     \
            sink = tfd_alloc(size, 16);                                                            \
            tfd_dealloc(sink, size, 16);                                                           \
        }                                                                                          \
        TEST_NO_TAIL(pad[0]);                                                                      \
    }
static void level_a(int n, size_t size);
static void level_b(int n, size_t size);
static void level_c(int n, size_t size);
LEVEL(level_a, level_b)
LEVEL(level_b, level_c)
LEVEL(level_c, level_a)

/* The daemon's life; returns the descriptor tables seen at three points
 * (after opening its files, halfway, at the end) concatenated into
 * `tables`, and exits nonzero on a wrong read-back or log. */
static void daemon_life(const char *dir, bool profiled, char *tables, size_t cap)
{
    mp_profiler *prof = NULL;
    if (profiled) {
        sink = tfd_alloc(64, 16); /* observed */
        tfd_dealloc(sink, 64, 16);
        mp_prof_config c;
        mp_prof_config_init(&c);
        c.sample_interval_bytes = 4096;
        c.seed = 99;
        CHILD_CHECK(mp_profiler_start(&c, &prof) == MP_PROF_OK, 20);
    }
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    CHILD_CHECK(open("/dev/null", O_RDONLY) == 0, 21);
    CHILD_CHECK(open("/dev/null", O_WRONLY) == 1, 22);
    CHILD_CHECK(open("/dev/null", O_WRONLY) == 2, 23);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", dir);
    int data = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    snprintf(path, sizeof path, "%s/log", dir);
    int log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHILD_CHECK(data == 3 && log == 4, 24);
    size_t o = 0;
    fd_lines(tables, cap, false, 0);
    o = strlen(tables);
    for (int i = 0; i < 600; i++) {
        char rec[32], back[32];
        memset(rec, 'a' + i % 26, sizeof rec);
        CHILD_CHECK(write(data, rec, sizeof rec) == (ssize_t)sizeof rec, 25);
        level_a(i % 17, 4096 + (size_t)i * 61 % 20000);
        CHILD_CHECK(lseek(data, -(off_t)sizeof rec, SEEK_CUR) >= 0, 26);
        CHILD_CHECK(read(data, back, sizeof back) == (ssize_t)sizeof back, 27);
        CHILD_CHECK(memcmp(back, rec, sizeof rec) == 0, 28);
        char line[32];
        int n = snprintf(line, sizeof line, "%d\n", i);
        CHILD_CHECK(write(log, line, (size_t)n) == n, 29);
        if (i == 300) {
            fd_lines(tables + o, cap - o, false, 0);
            o += strlen(tables + o);
        }
    }
    fd_lines(tables + o, cap - o, false, 0);
    /* The files hold exactly what the program wrote. */
    struct stat st;
    CHILD_CHECK(fstat(data, &st) == 0 && st.st_size == 600 * 32, 30);
    off_t expect = 0;
    for (int i = 0; i < 600; i++)
        expect += i < 10 ? 2 : i < 100 ? 3 : 4;
    CHILD_CHECK(fstat(log, &st) == 0 && st.st_size == expect, 31);
    if (prof != NULL) {
        mp_prof_stats s;
        mp_prof_diagnostics(&s);
        CHILD_CHECK(s.samples_taken > 100, 32); /* it was sampled all along */
        mp_profiler_free(prof);
    }
}

/* Runs daemon_life in a child (it closes every descriptor, Criterion's
 * too); its tables come back through a shared mapping. */
static int run_daemon(bool profiled, char *tables, size_t cap)
{
    char dir[] = "/tmp/mimprof-fds-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *shared = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(shared, MAP_FAILED);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        daemon_life(dir, profiled, shared, cap);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    memcpy(tables, shared, cap);
    munmap(shared, cap);
    char p[4200];
    snprintf(p, sizeof p, "%s/data", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/log", dir);
    unlink(p);
    rmdir(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(descriptors, daemon_keeps_its_descriptors_and_files)
{
    static char plain[8192], profiled[8192];
    cr_assert_eq(run_daemon(false, plain, sizeof plain), 0, "the program itself works");
    cr_assert_eq(run_daemon(true, profiled, sizeof profiled), 0,
                 "profiled: read-back, files or sampling wrong (child exit code)");
    /* The data file and log paths differ per run: compare their names. */
    char *a = plain, *b = profiled;
    for (; *a && *b; a++, b++) {
        if (strncmp(a, "/tmp/mimprof-fds-", 17) == 0 && strncmp(b, "/tmp/mimprof-fds-", 17) == 0) {
            a += 23; /* the XXXXXX */
            b += 23;
        }
        if (*a != *b)
            break;
    }
    cr_assert(*a == '\0' && *b == '\0', "descriptor tables differ:\nplain:\n%s\nprofiled:\n%s",
              plain, profiled);
}

/* Symbolizing with file:line keeps each object's file (and its separate
 * debug file) open in libdw for the process's life. Regression: libdw
 * opened them itself at the lowest free numbers (3, 4, ...) without
 * close-on-exec, so a program found its next open() elsewhere and every
 * program it executed inherited them. Now each is at the top of the range
 * and close-on-exec (mp_prof_fd_high). Run in a child with a fresh
 * descriptor table: Criterion's own descriptors are not ours to judge. */
Test(descriptors, symbolized_report_keeps_its_files_out_of_the_programs_range)
{
    char *shared = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(shared, MAP_FAILED);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        sink = tfd_alloc(64, 16); /* observed */
        tfd_dealloc(sink, 64, 16);
        mp_prof_config c;
        mp_prof_config_init(&c);
        c.sample_interval_bytes = 4096;
        c.seed = 7;
        c.symbolize = MP_PROF_SYMBOLIZE_LINES;
        mp_profiler *prof = NULL;
        mp_prof_status st = mp_profiler_start(&c, &prof);
        if (st == MP_PROF_E_UNSUPPORTED)
            _exit(77); /* built without libdw: nothing kept open */
        CHILD_CHECK(st == MP_PROF_OK, 30 + (int)st);
        for (int i = 0; i < 200; i++)
            level_a(i % 17, 4096);
        uint8_t *pb = NULL;
        size_t len = 0;
        CHILD_CHECK(mp_profiler_report(prof, &pb, &len) == MP_PROF_OK && len > 0, 21);
        mp_prof_buffer_free(pb);
        struct rlimit rl;
        CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, 22);
        rlim_t top = rl.rlim_cur > 4096 ? 4096 : rl.rlim_cur;
        fd_lines(shared, 8192, true, (int)top - 64);
        if (shared[0] != '\0')
            _exit(0); /* the parent shows them */
        /* libdw holds files: the test looked where it means to */
        int held = 0;
        for (int fd = (int)top - 64; fd < (int)top; fd++)
            held += fcntl(fd, F_GETFD) >= 0;
        CHILD_CHECK(held > 0, 23);
        mp_profiler_free(prof);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died");
    if (WEXITSTATUS(status) == 77) {
        munmap(shared, 8192);
        cr_skip_test("built without libdw");
    }
    cr_assert_eq(WEXITSTATUS(status), 0, "child exit code %d", WEXITSTATUS(status));
    cr_assert_str_empty(shared, "descriptors in the program's range or inherited by exec:\n%s",
                        shared);
    munmap(shared, 8192);
}

/* Runs body in a child at descriptor limits (soft, hard); its exit code. */
static int at_limits(rlim_t soft, rlim_t hard, int (*body)(rlim_t soft))
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {soft, hard};
        CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, 40);
        _exit(body(soft));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died");
    return WEXITSTATUS(status);
}

/* With room above the soft limit: a descriptor moves at or above it (out
 * of every number the program can get), a file opens there although the
 * program holds every number below, and the limit is as it was. */
static int room_above(rlim_t soft)
{
    CHILD_CHECK(mp_prof_fd_room(), 41);
    int fd = mp_prof_fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
    CHILD_CHECK(fd >= (int)soft, 42);
    CHILD_CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, 43);
    while (open("/dev/null", O_RDONLY) >= 0) /* the program takes every number */
        ;
    CHILD_CHECK(errno == EMFILE, 44);
    int f = mp_prof_fd_open("/dev/null", O_RDONLY, 0);
    CHILD_CHECK(f >= (int)soft && f != fd, 45);
    struct rlimit rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur == soft, 46);
    return 0;
}

/* soft = hard: no number the program cannot get; mp_prof_fd_room says so. */
static int no_room(rlim_t soft)
{
    (void)soft;
    CHILD_CHECK(!mp_prof_fd_room(), 47);
    return 0;
}

Test(descriptors, kept_descriptors_go_above_the_soft_limit_when_there_is_room)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max <= 256)
        cr_skip_test("hard descriptor limit %llu", (unsigned long long)rl.rlim_max);
    for (rlim_t soft = 64; soft <= 256; soft *= 4) {
        int code = at_limits(soft, rl.rlim_max, room_above);
        cr_assert_eq(code, 0, "soft %llu: child check %d", (unsigned long long)soft, code);
        code = at_limits(soft, soft, no_room);
        cr_assert_eq(code, 0, "soft = hard = %llu: child check %d", (unsigned long long)soft, code);
    }
}
