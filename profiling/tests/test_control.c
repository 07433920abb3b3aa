/* SPDX-License-Identifier: MIT */
/* The process's control (<mimprof/profiling_control.h>) opened by a
 * program that links only the profiling library: this test, dormant
 * until asked, driven over its real sockets by a raw `mimprof ctl`
 * client (the protocol of the header), a raw HTTP client and, when Go is
 * installed, `go tool pprof`. The end-to-end run with the `mimprof ctl`
 * command itself is the cli package's (cli/tests/test_ctl.py,
 * LibraryApi): that package sits above this one. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <mimprof/profiling_control.h>
#include <mimprof/sys.h>

#include "helpers.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tcl, mp_sys_mimalloc);

enum { BLOCK = 4096, BLOCKS = 4000 };

static void *g_kept[BLOCKS];

/* The leaking site: BLOCKS blocks of 4 KiB, kept. Not static: the
 * generic platform backend names functions with dladdr() (the test is
 * linked with -rdynamic). */
void leak_blocks(void);
__attribute__((noinline)) void leak_blocks(void)
{
    for (int i = 0; i < BLOCKS; i++) {
        g_kept[i] = tcl_alloc(BLOCK, 16);
        cr_assert(g_kept[i] != NULL);
        memset(g_kept[i], 1, BLOCK);
    }
}

static void free_blocks(void)
{
    for (int i = 0; i < BLOCKS; i++) {
        tcl_dealloc(g_kept[i], BLOCK, 16);
        g_kept[i] = NULL;
    }
}

/* A buffer of the answers. */
typedef struct {
    char *p;
    size_t len;
} buf;

static buf read_all(int fd)
{
    buf b = {malloc(1 << 16), 0};
    size_t cap = 1 << 16;
    cr_assert(b.p != NULL);
    for (;;) {
        if (b.len + 4096 > cap) {
            cap *= 2;
            b.p = realloc(b.p, cap);
            cr_assert(b.p != NULL);
        }
        ssize_t r = read(fd, b.p + b.len, cap - b.len - 1);
        if (r <= 0)
            break;
        b.len += (size_t)r;
    }
    b.p[b.len] = '\0';
    close(fd);
    return b;
}

static void send_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return; /* the server may close first (a refusal, a bound) */
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* A connection to the control socket of `pid`, or -1. */
static int ctl_connect(long pid)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name(pid, a.sun_path, sizeof a.sun_path);
    cr_assert(n > 1 && a.sun_path[0] == '\0');
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* `n` bytes sent to the control socket of `pid`; all it answers. */
static buf ctl_raw(long pid, const void *req, size_t n)
{
    int fd = ctl_connect(pid);
    cr_assert(fd >= 0, "no control socket for pid %ld", pid);
    send_all(fd, req, n);
    shutdown(fd, SHUT_WR);
    return read_all(fd);
}

static buf ctl(const char *line) { return ctl_raw((long)getpid(), line, strlen(line)); }

/* The value of "key: value" in a status answer (static storage). */
static const char *field(const buf *b, const char *key)
{
    static char v[256];
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *p = strstr(b->p, pat);
    cr_assert(p != NULL, "no %s in: %s", key, b->p);
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    snprintf(v, sizeof v, "%.*s", (int)n, p);
    return v;
}

/* A connection to the HTTP endpoint at "HOST:PORT" (IPv4). */
static int http_connect(const char *addr)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    cr_assert(colon != NULL);
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    cr_assert(inet_pton(AF_INET, host, &a.sin_addr) == 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect %s", addr);
    return fd;
}

/* GET `path`: the whole answer; *code its status, *body where it starts. */
static buf http_get(const char *addr, const char *path, int *code, const char **body)
{
    int fd = http_connect(addr);
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr);
    send_all(fd, req, (size_t)n);
    buf b = read_all(fd);
    cr_assert(sscanf(b.p, "HTTP/1.1 %d", code) == 1, "not HTTP: %s", b.p);
    const char *e = strstr(b.p, "\r\n\r\n");
    cr_assert(e != NULL);
    *body = e + 4;
    return b;
}

/* gunzip of `n` bytes into a decoded profile. */
static void gunzip_decode(const uint8_t *gz, size_t n, tp_profile *out)
{
    cr_assert(n > 2 && gz[0] == 0x1f && gz[1] == 0x8b, "not gzip");
    size_t cap = 1 << 22;
    uint8_t *raw = malloc(cap);
    cr_assert(raw != NULL);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    cr_assert(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK);
    zs.next_in = (Bytef *)gz;
    zs.avail_in = (uInt)n;
    zs.next_out = raw;
    zs.avail_out = (uInt)cap;
    cr_assert(inflate(&zs, Z_FINISH) == Z_STREAM_END, "gzip body does not inflate");
    size_t len = cap - zs.avail_out;
    inflateEnd(&zs);
    cr_assert(tp_decode(raw, len, out), "the profile does not decode");
    free(raw);
}

static mp_prof_control *open_control(const char *http, bool children)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.http = http;
    o.serve_forked_children = children;
    o.config.seed = 7;
    mp_prof_control *c = NULL;
    char why[512] = "";
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_OK, "%s", why);
    cr_assert(c != NULL);
    return c;
}

static void observe_allocator(void)
{
    void *volatile p = tcl_alloc(64, 16);
    tcl_dealloc(p, 64, 16);
}

/* The estimate of BLOCKS blocks of 4 KiB at a 16 KiB interval: about 880
 * samples, a relative standard deviation of 3%; a fixed seed. */
static void expect_leak(int64_t inuse, const char *what)
{
    double want = (double)BLOCKS * BLOCK;
    cr_expect(inuse > 0.8 * want && inuse < 1.2 * want, "%s: inuse_space %lld, want ~%.0f", what,
              (long long)inuse, want);
}

Test(control, dormant_start_report_http_stop, .timeout = 120)
{
    observe_allocator();
    mp_prof_control *c = open_control("127.0.0.1:0", false);
    const char *addr = mp_prof_control_http_address(c);
    cr_assert(addr != NULL && strncmp(addr, "127.0.0.1:", 10) == 0);
    char address[96];
    snprintf(address, sizeof address, "%s", addr);

    buf b = ctl("status\n");
    cr_assert(strncmp(b.p, "ok\n", 3) == 0, "%s", b.p);
    cr_expect_str_eq(field(&b, "state"), "dormant");
    cr_expect_eq(atol(field(&b, "pid")), (long)getpid());
    cr_expect_str_eq(field(&b, "every"), "0 (on request)");
    cr_expect_str_eq(field(&b, "http"), address);
    free(b.p);
    int code;
    const char *body;
    b = http_get(address, "/debug/pprof/heap", &code, &body);
    cr_expect_eq(code, 503, "%s", b.p);
    cr_expect(strstr(body, "is dormant") != NULL, "%s", body);
    free(b.p);

    b = ctl("start interval=16k\n");
    cr_expect_str_eq(field(&b, "state"), "running");
    cr_expect_str_eq(field(&b, "interval"), "16384");
    free(b.p);
    leak_blocks();

    b = ctl("report\n");
    size_t n = 0;
    cr_assert(sscanf(b.p, "ok %zu\n", &n) == 1, "%s", b.p);
    const char *nl = strchr(b.p, '\n');
    cr_assert_eq(b.len - (size_t)(nl + 1 - b.p), n, "exactly BYTES bytes follow");
    tp_profile p;
    cr_assert(tp_decode((const uint8_t *)nl + 1, n, &p), "report -o's pprof decodes");
    expect_leak(tp_total(&p, "inuse_space"), "report");
    tp_free(&p);
    free(b.p);

    b = http_get(address, "/debug/pprof/heap", &code, &body);
    cr_assert_eq(code, 200, "%s", b.p);
    cr_expect(strstr(b.p, "Content-Type: application/octet-stream\r\n") != NULL);
    cr_expect(strstr(b.p, "Content-Disposition: attachment; filename=\"heap\"\r\n") != NULL);
    gunzip_decode((const uint8_t *)body, b.len - (size_t)(body - b.p), &p);
    int64_t inuse = tp_total(&p, "inuse_space"), alloc = tp_total(&p, "alloc_space");
    expect_leak(inuse, "/debug/pprof/heap");
    /* every report was merged: alloc_* since the start = what is live */
    cr_expect(alloc >= inuse && alloc < inuse + inuse / 100, "alloc %lld, inuse %lld",
              (long long)alloc, (long long)inuse);
    for (size_t i = 0; i < p.nsamples; i++)
        cr_expect(tp_label_str(&p, &p.samples[i], "__delta__") == NULL, "no __delta__ label");
    tp_free(&p);
    free(b.p);

    b = http_get(address, "/debug/pprof/", &code, &body);
    cr_expect_eq(code, 200);
    cr_expect(strstr(body, "href=\"heap\"") != NULL && strstr(body, "href=\"allocs\"") != NULL);
    free(b.p);

    b = ctl("image\n");
#if TEST_PLATFORM_ELF
    cr_expect(strncmp(b.p, "ok ", 3) == 0, "%.200s", b.p);
#else
    cr_expect(strncmp(b.p, "error: ", 7) == 0, "heap images are ELF only: %.200s", b.p);
#endif
    free(b.p);
    b = ctl("start every=1s\n");
    cr_expect(strstr(b.p, "error: ") == b.p && strstr(b.p, "on request only") != NULL, "%s", b.p);
    free(b.p);
    b = ctl("stop\n");
    cr_expect_str_eq(field(&b, "state"), "dormant");
    cr_expect_str_eq(field(&b, "reports"), "2");
    free(b.p);
    b = http_get(address, "/debug/pprof/allocs", &code, &body);
    cr_expect_eq(code, 503, "dormant again");
    free(b.p);
    b = ctl("report\n");
    cr_expect(strncmp(b.p, "error: dormant", 14) == 0, "%s", b.p);
    free(b.p);
    mp_prof_control_close(c);
    free_blocks();
}

Test(control, garbage_on_both_sockets_leaves_it_working, .timeout = 120)
{
    observe_allocator();
    mp_prof_control *c = open_control("0", false);
    char address[96];
    snprintf(address, sizeof address, "%s", mp_prof_control_http_address(c));
    srand(11);
    char junk[3000];
    for (int round = 0; round < 20; round++) {
        size_t n = 1 + (size_t)rand() % sizeof junk;
        for (size_t i = 0; i < n; i++)
            junk[i] = (char)rand();
        buf b = ctl_raw((long)getpid(), junk, n);
        cr_expect(b.len == 0 || strncmp(b.p, "error: ", 7) == 0 || strncmp(b.p, "ok", 2) == 0,
                  "%.100s", b.p);
        free(b.p);
        int fd = http_connect(address);
        send_all(fd, junk, n);
        shutdown(fd, SHUT_WR);
        b = read_all(fd);
        cr_expect(b.len == 0 || strncmp(b.p, "HTTP/1.1 ", 9) == 0, "%.100s", b.p);
        free(b.p);
    }
    char big[20000];
    memset(big, 'x', sizeof big);
    buf b = ctl_raw((long)getpid(), big, sizeof big);
    cr_expect(strncmp(b.p, "error: request longer", 21) == 0, "%s", b.p);
    free(b.p);
    /* slow clients hold a slot each, not the thread */
    int slow[3];
    for (int i = 0; i < 3; i++) {
        slow[i] = http_connect(address);
        send_all(slow[i], "GET /debug/pp", 13);
    }
    b = ctl("start\n");
    cr_expect_str_eq(field(&b, "state"), "running");
    free(b.p);
    leak_blocks();
    int code;
    const char *body;
    b = http_get(address, "/debug/pprof/heap", &code, &body);
    cr_expect_eq(code, 200, "served while three slow clients wait");
    free(b.p);
    for (int i = 0; i < 3; i++)
        close(slow[i]);
    mp_prof_control_close(c);
    free_blocks();
}

Test(control, close_reopen_and_refusals, .timeout = 60)
{
    observe_allocator();
    mp_prof_control *c = open_control(NULL, false);
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    mp_prof_control *c2 = NULL;
    char why[512];
    cr_expect_eq(mp_prof_control_open(&o, NULL, &c2, why, sizeof why), MP_PROF_E_BUSY);
    cr_expect_null(mp_prof_control_http_address(c), "no HTTP endpoint asked for");
    buf b = ctl("start\n");
    cr_expect_str_eq(field(&b, "state"), "running");
    free(b.p);
    mp_prof_control_close(c); /* its running session ends with it */
    mp_prof_stats st;
    mp_prof_diagnostics(&st);
    cr_expect(!st.active, "the control's session was stopped");
    cr_expect_eq(ctl_connect((long)getpid()), -1, "closed: no socket");
    c = open_control(NULL, false);
    b = ctl("status\n");
    cr_expect_str_eq(field(&b, "state"), "dormant");
    free(b.p);
    mp_prof_control_close(c);
    mp_prof_control_close(NULL);

    o.http = "0.0.0.0:0";
    cr_expect_eq(mp_prof_control_open(&o, NULL, &c2, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
    cr_expect(strstr(why, "every interface") != NULL, "%s", why);
    cr_expect_eq(mp_prof_control_check_http("nonsense", true, why, sizeof why),
                 MP_PROF_E_INVALID_CONFIG);
    cr_expect_eq(mp_prof_control_check_http("[::1]:0", false, why, sizeof why), MP_PROF_OK);
    o.http_wildcard = true;
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c2, why, sizeof why), MP_PROF_OK, "%s", why);
    cr_expect(strncmp(mp_prof_control_http_address(c2), "0.0.0.0:", 8) == 0);
    mp_prof_control_close(c2);
    o.ctl = false;
    o.http = NULL;
    cr_expect_eq(mp_prof_control_open(&o, NULL, &c2, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
    mp_prof_control_hooks half = {.state = NULL};
    o.ctl = true;
    cr_expect_eq(mp_prof_control_open(&o, &half, &c2, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
}

/* Forks a child that waits for its stdin pipe to close; returns its pid. */
static pid_t fork_waiting_child(int *release)
{
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(60); /* never outlives a failed test */
        close(p[1]);
        char x;
        ssize_t r = read(p[0], &x, 1);
        _exit(r == 0 ? 0 : 1);
    }
    close(p[0]);
    *release = p[1];
    return pid;
}

static void end_child(pid_t pid, int release)
{
    close(release);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The child's socket comes up on its own thread: wait for it. */
static int connect_soon(long pid)
{
    for (int i = 0; i < 200; i++) {
        int fd = ctl_connect(pid);
        if (fd >= 0)
            return fd;
        usleep(10000);
    }
    return -1;
}

Test(control, forked_children_serve_their_own_socket_or_none, .timeout = 60)
{
    if (TEST_TSAN)
        cr_skip_test("TSan cannot start a thread in the child of a multi-threaded fork "
                     "(\"starting new threads after multi-threaded fork is not supported\"); "
                     "run in the gcc and ASan trees");
    observe_allocator();
    mp_prof_control *c = open_control("0", true);
    buf b = ctl("start\n");
    free(b.p);
    int release;
    pid_t child = fork_waiting_child(&release);
    int fd = connect_soon((long)child);
    cr_assert(fd >= 0, "the child serves its own socket");
    send_all(fd, "status\n", 7);
    b = read_all(fd);
    cr_expect_eq(atol(field(&b, "pid")), (long)child);
    cr_expect_str_eq(field(&b, "state"), "dormant", "the parent's session is not the child's");
    cr_expect_str_eq(field(&b, "http"), "off", "the port is the parent's");
    free(b.p);
    end_child(child, release);
    b = ctl("status\n");
    cr_expect_str_eq(field(&b, "state"), "running", "the parent's session goes on");
    cr_expect_neq(strcmp(field(&b, "http"), "off"), 0);
    free(b.p);
    mp_prof_control_close(c);

    c = open_control(NULL, false);
    child = fork_waiting_child(&release);
    usleep(200000);
    cr_expect_eq(ctl_connect((long)child), -1, "serve_forked_children off: no socket");
    end_child(child, release);
    b = ctl("status\n");
    cr_expect_str_eq(field(&b, "state"), "dormant");
    free(b.p);
    mp_prof_control_close(c);
}

Test(control, descriptors_high_and_cloexec_signals_blocked, .timeout = 60)
{
    if (TEST_TSAN)
        cr_skip_test(
            "TSan's runtime adds its own thread and leaves SIGSYS unblocked in the threads "
            "it starts, so the task count and the mask are not the library's; run in the "
            "gcc and ASan trees");
    observe_allocator();
    static bool before[4096], after[4096];
    test_fds_now(before, 4096);
    DIR *d = opendir("/proc/self/task");
    int tasks_before = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        tasks_before += e->d_name[0] != '.';
    closedir(d);
    mp_prof_control *c = open_control("0", false);
    test_fds_now(after, 4096);
    struct rlimit rl;
    cr_assert(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    long floor = (long)(rl.rlim_cur < 4096 ? rl.rlim_cur : 4096) - 64;
    int added = 0;
    for (int fd = 0; fd < 4096; fd++) {
        if (!after[fd] || before[fd])
            continue;
        added++;
        cr_expect(fd >= floor, "descriptor %d below %ld", fd, floor);
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC, "descriptor %d not close-on-exec", fd);
    }
    cr_expect_eq(added, 4, "ctl socket, HTTP socket, the wake-up pipe");
    /* The server thread: every signal the kernel lets it block is blocked. */
    d = opendir("/proc/self/task");
    int tasks = 0, checked = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        tasks++;
        if (atol(e->d_name) == (long)getpid())
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            unsigned long long mask;
            if (sscanf(line, "SigBlk: %llx", &mask) == 1) {
                for (int sig = 1; sig < 32; sig++)
                    if (sig != SIGKILL && sig != SIGSTOP)
                        cr_expect(mask & (1ull << (sig - 1)), "signal %d not blocked", sig);
                checked++;
            }
        }
        if (f != NULL)
            fclose(f);
    }
    closedir(d);
    cr_expect_eq(tasks, tasks_before + 1, "one server thread");
    cr_expect_geq(checked, 1);
    mp_prof_control_close(c);
    test_fds_now(after, 4096);
    cr_expect_eq(memcmp(before, after, sizeof before), 0,
                 "close leaves the descriptors as they were");
}

Test(control, http_starts_a_dormant_process_when_asked, .timeout = 60)
{
    observe_allocator();
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.ctl = false;
    o.http = "0";
    o.http_starts = true;
    mp_prof_control *c = NULL;
    char why[512];
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_OK, "%s", why);
    char address[96];
    snprintf(address, sizeof address, "%s", mp_prof_control_http_address(c));
    int code;
    const char *body;
    buf b = http_get(address, "/debug/pprof/heap", &code, &body);
    cr_expect_eq(code, 200, "%s", b.p);
    free(b.p);
    mp_prof_stats st;
    mp_prof_diagnostics(&st);
    cr_expect(st.active, "the request started a session");
    mp_prof_control_close(c);
}

Test(control, go_tool_pprof_reads_it, .timeout = 600)
{
    if (system("command -v go >/dev/null 2>&1") != 0)
        cr_skip_test("go not found");
    observe_allocator();
    mp_prof_control *c = open_control("127.0.0.1:0", false);
    buf b = ctl("start interval=16k\n");
    free(b.p);
    leak_blocks();
    char cmd[1024];
    const char *cache = getenv("MIMPROF_GOCACHE");
    char dir[] = "/tmp/mimprof-test-go.XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof cmd,
             "HOME=%s GOPATH=%s/gopath GOCACHE=%s GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local "
             "CGO_ENABLED=0 go tool pprof -top -sample_index=inuse_space "
             "http://%s/debug/pprof/heap 2>&1",
             dir, dir, cache != NULL && cache[0] != '\0' ? cache : dir,
             mp_prof_control_http_address(c));
    FILE *f = popen(cmd, "r");
    cr_assert(f != NULL);
    char line[1024];
    bool found = false;
    char out[8192] = "";
    while (fgets(line, sizeof line, f) != NULL) {
        found |= strstr(line, "leak_blocks") != NULL;
        if (strlen(out) + strlen(line) < sizeof out)
            strcat(out, line);
    }
    int rc = pclose(f);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(found, "no leak_blocks in go tool pprof -top:\n%s", out);
    mp_prof_control_close(c);
    free_blocks();
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", dir, dir);
    cr_expect_eq(system(cmd), 0);
}
