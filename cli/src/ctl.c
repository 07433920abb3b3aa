/* SPDX-License-Identifier: MIT */
/* mimprof ctl: controls a profiled process while it runs, over the
 * control socket of the profiling library (<mimprof/profiling_control.h>:
 * the socket, who may use it, and the protocol), which the preload
 * runtime and any program that opens a control serve.
 *
 *   mimprof ctl list
 *   mimprof ctl PID status | start [--interval SIZE] [--every DURATION] | stop
 *   mimprof ctl PID report -o FILE | image -o FILE | set interval SIZE
 *
 * PID may be the process itself or a `mimprof run` (then its child that
 * has a socket). The answer of the target is checked to come from that
 * process, so a process that took another's name is never believed:
 * either the socket's server is PID (SO_PEERCRED), or -- a socket that
 * `mimprof run`'s collector holds on PID's behalf, handing the
 * connections to PID -- every chunk of the answer carries the kernel's
 * credentials of its writer (SO_PASSCRED, SCM_CREDENTIALS) naming PID.
 * `report` and `image` are streamed back over the socket and written
 * here, by this command, with its own identity, in its own mount
 * namespace, atomically (temporary name, rename): the target never opens
 * a path a caller chose, needs no access to the caller's directory, and a
 * caller cannot make it write where it could not write itself. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "collector.h"
#include "units.h"
#include "views.h"
#include <mimprof/profiling.h>
#include <mimprof/profiling_control.h>

enum { EXIT_ERR = 1 };

/* The pid of `pid` in its own (innermost) pid namespace: the last field
 * of NSpid in /proc/PID/status; the pid itself on kernels without it. -1:
 * no such process. */
static long ns_pid(long pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    long inner = pid;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *p = line + 6, *end;
            for (;;) {
                long v = strtol(p, &end, 10);
                if (end == p)
                    break;
                inner = v;
                p = end;
            }
        }
    fclose(f);
    return inner;
}

/* Whether `pid` runs under a collector of `mimprof run` (its
 * environment names one; false when it cannot be read). */
static bool under_collector(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    static const char key[] = "MIMPROF_COLLECTOR=";
    char entry[sizeof key];
    size_t n = 0;
    bool found = false;
    int c;
    /* Each NUL-ended entry's first bytes, compared with the key. */
    while (!found && (c = getc(f)) != EOF) {
        if (c == '\0') {
            n = 0;
        } else if (n < sizeof key - 1) {
            entry[n++] = (char)c;
            found = n == sizeof key - 1 && memcmp(entry, key, n) == 0;
        }
    }
    fclose(f);
    return found;
}

/* A connection to the socket of `pid`, with SO_PASSCRED set before
 * anything is sent: the kernel then attaches its writer's credentials to
 * each chunk of the answer (ask() checks them). *holder: the pid of the
 * socket's server (SO_PEERCRED), which is `pid` itself when it listens
 * on its own (then the answer needs no further check), or a host that
 * listens on its behalf. The descriptor, or -1 with errno. */
static int connect_pid(long pid, long *holder)
{
    long inner = ns_pid(pid);
    if (inner < 0) {
        errno = ESRCH;
        return -1;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name(inner, a.sun_path, sizeof a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* Set before connect(): every chunk written to this socket carries
     * credentials (a writer can name no other pid than its own without
     * CAP_SYS_ADMIN), also a refusal a host's process writes as soon as
     * it takes the connection, before any request. */
    int on = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
        close(fd);
        return -1;
    }
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int r;
    /* A process under `mimprof run`'s collector has its socket bound by
     * the collector when it has read the process's hello: a moment after
     * the process started, which a client that starts it and controls it
     * at once may not wait for by itself. */
    for (int i = 0; (r = connect(fd, (struct sockaddr *)&a, alen)) != 0 && errno == ECONNREFUSED &&
                    i < 100 && under_collector(pid);
         i++)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    if (r != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *holder = (long)cr.pid;
    return fd;
}

/* The pid that SCM_CREDENTIALS names in `m` (translated by the kernel into
 * this process's pid namespace: 0 when the writer is not visible here),
 * or -1 when it has none. Descriptors passed with it are closed. */
static long chunk_writer(struct msghdr *m)
{
    long writer = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cr;
            memcpy(&cr, CMSG_DATA(c), sizeof cr);
            writer = (long)cr.pid;
        } else if (c->cmsg_type == SCM_RIGHTS) {
            size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < n; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
                close(fd);
            }
        }
    }
    return writer;
}

/* One recv() of the answer into p[0..cap): its length (0: the end, -1:
 * an error, errno set). When `need` is not 0, *writer receives the pid
 * that wrote the chunk (-1: no credentials), see chunk_writer(). The
 * kernel never merges chunks of different writers in one read when
 * SO_PASSCRED is set. */
static ssize_t recv_chunk(int fd, char *p, size_t cap, long need, long *writer)
{
    if (need == 0)
        return recv(fd, p, cap, 0);
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(16 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = p, .iov_len = cap};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    *writer = r > 0 ? chunk_writer(&m) : need;
    return r;
}

static long parent_of(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0)
        return -1;
    buf[r] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold anything */
    long ppid;
    char state;
    return p != NULL && sscanf(p + 1, " %c %ld", &state, &ppid) == 2 ? ppid : -1;
}

/* Same network namespace as this process: 1, 0, or -1 (cannot tell). */
static int same_netns(long pid)
{
    char a[128], b[128], path[64];
    snprintf(path, sizeof path, "/proc/%ld/ns/net", pid);
    ssize_t la = readlink("/proc/self/ns/net", a, sizeof a - 1);
    ssize_t lb = readlink(path, b, sizeof b - 1);
    if (la <= 0 || lb <= 0)
        return -1;
    return la == lb && memcmp(a, b, (size_t)la) == 0;
}

/* A connection to PID, or to the child of PID (a `mimprof run`) that
 * has a socket; *holder: its server's pid (connect_pid()). -1: a message
 * said why. */
static int open_target(long pid, long *target, long *holder)
{
    int fd = connect_pid(pid, holder);
    if (fd >= 0) {
        *target = pid;
        return fd;
    }
    if (errno == ESRCH) {
        fprintf(stderr, "mimprof ctl: no process %ld\n", pid);
        return -1;
    }
    /* A `mimprof run`: its children. */
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char *end;
        long c = strtol(e->d_name, &end, 10);
        if (*end != '\0' || c <= 0 || parent_of(c) != pid)
            continue;
        fd = connect_pid(c, holder);
        if (fd >= 0) {
            closedir(d);
            *target = c;
            return fd;
        }
    }
    if (d != NULL)
        closedir(d);
    if (same_netns(pid) == 0)
        fprintf(stderr,
                "mimprof ctl: pid %ld is in another network namespace: its control socket "
                "(abstract, per network namespace) is not reachable from here; run "
                "`nsenter -t %ld -n mimprof ctl %ld ...`\n",
                pid, pid, pid);
    else
        fprintf(stderr,
                "mimprof ctl: pid %ld has no control socket (not run by mimprof run or the "
                "preload in runtime mode, MIMPROF_CTL=0, or a bare preload)\n",
                pid);
    return -1;
}

/* The whole answer to `req` (malloc'd, NUL-terminated), or NULL. With
 * `need` not 0, every chunk of it must have been written by process
 * `need` (as this process sees its pid): otherwise NULL, and *impostor
 * is set (no message: the caller says who holds the socket). A hosted
 * socket whose host closes the connection before any answer (the
 * process ended, or exec'd a program that is not profiled, while the
 * request was on its way) gives NULL with *dropped set and no message:
 * the caller looks again (its socket is gone by then, or a new one
 * answers). */
static char *ask(int fd, const char *req, size_t *len, long need, bool *impostor, bool *dropped)
{
    *impostor = *dropped = false;
    size_t rl = strlen(req);
    if (send(fd, req, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
        if (need != 0 && (errno == EPIPE || errno == ECONNRESET)) {
            *dropped = true;
            return NULL;
        }
        fprintf(stderr, "mimprof ctl: cannot send the request: %s\n", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf == NULL) {
            fprintf(stderr, "mimprof ctl: out of memory\n");
            return NULL;
        }
        if (n + 1 == cap) {
            char *nb = cap < ((size_t)1 << 34) ? realloc(buf, cap * 2) : NULL;
            if (nb == NULL)
                free(buf);
            buf = nb;
            cap *= 2;
            continue;
        }
        long writer = need;
        ssize_t r = recv_chunk(fd, buf + n, cap - 1 - n, need, &writer);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && writer != need) {
            *impostor = true;
            free(buf);
            return NULL;
        }
        if (need != 0 && n == 0 && (r == 0 || (r < 0 && errno == ECONNRESET))) {
            *dropped = true;
            free(buf);
            return NULL;
        }
        if (r < 0) {
            fprintf(stderr, "mimprof ctl: reading the answer: %s\n", strerror(errno));
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Writes `len` bytes to `path` by temporary file and rename (gzip when
 * the name ends in .gz). */
static int write_file(const char *path, const char *data, size_t len)
{
    char tmp[PATH_MAX + 64];
    const char *slash = strrchr(path, '/');
    int dlen = slash != NULL ? (int)(slash - path + 1) : 0;
    snprintf(tmp, sizeof tmp, "%.*s.%s.%ld.tmp", dlen, path, path + dlen, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "mimprof ctl: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    size_t pl = strlen(path);
    bool ok;
    if (pl > 3 && strcmp(path + pl - 3, ".gz") == 0) {
        gzFile gz = gzdopen(fd, "wb");
        ok = gz != NULL && (len == 0 || gzwrite(gz, data, (unsigned)len) == (int)len);
        ok = gz != NULL && gzclose(gz) == Z_OK && ok;
        if (gz == NULL)
            close(fd);
    } else {
        size_t off = 0;
        ok = true;
        while (ok && off < len) {
            ssize_t w = write(fd, data + off, len - off);
            ok = w > 0 || (w < 0 && errno == EINTR);
            if (w > 0)
                off += (size_t)w;
        }
        ok = close(fd) == 0 && ok;
    }
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "mimprof ctl: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Prints or saves the answer; the exit status. */
static int finish(long target, const char *ans, size_t len, const char *out, bool report)
{
    const char *nl = memchr(ans, '\n', len);
    if (nl == NULL) {
        fprintf(stderr, "mimprof ctl: pid %ld gave no answer (closed)\n", target);
        return EXIT_ERR;
    }
    if (strncmp(ans, "error: ", 7) == 0) {
        fprintf(stderr, "mimprof ctl: pid %ld: %.*s\n", target, (int)(nl - ans - 7), ans + 7);
        return EXIT_ERR;
    }
    if (strncmp(ans, "ok", 2) != 0) {
        fprintf(stderr, "mimprof ctl: pid %ld: unexpected answer\n", target);
        return EXIT_ERR;
    }
    const char *body = nl + 1;
    size_t blen = len - (size_t)(body - ans);
    if (out == NULL) {
        fwrite(body, 1, blen, stdout);
        return MPT_EXIT_OK;
    }
    unsigned long long want = strtoull(ans + 2, NULL, 10);
    if (want != blen) {
        fprintf(stderr, "mimprof ctl: pid %ld: answer cut short (%zu of %llu bytes)\n", target,
                blen, want);
        return EXIT_ERR;
    }
    /* A process under `mimprof run`'s collector reports unsymbolized (the
     * collector names the frames of its files: collector_symbols.c):
     * named here the same way. A profile already named is unchanged. */
    uint8_t *named = NULL;
    size_t nlen = 0;
    mpt_csyms *syms = report ? mpt_csyms_new(MP_PROF_SYMBOLIZE_FUNCTIONS) : NULL;
    if (syms != NULL && mpt_csyms_apply(syms, (const uint8_t *)body, blen, &named, &nlen) == 0) {
        body = (const char *)named;
        blen = nlen;
    }
    mpt_csyms_free(syms);
    int wrc = write_file(out, body, blen);
    free(named);
    if (wrc != 0)
        return EXIT_ERR;
    fprintf(stderr, "mimprof ctl: pid %ld: %s written (%zu bytes)\n", target, out, blen);
    return MPT_EXIT_OK;
}

/* mimprof ctl list: the sockets of this network namespace
 * (/proc/net/unix), of this user's processes (every process for root). */
static int list(void)
{
    FILE *f = fopen("/proc/net/unix", "re");
    if (f == NULL) {
        fprintf(stderr, "mimprof ctl: cannot read /proc/net/unix: %s\n", strerror(errno));
        return EXIT_ERR;
    }
    char line[1024];
    printf("%-8s %-8s %s\n", "PID", "STATE", "COMMAND");
    while (fgets(line, sizeof line, f) != NULL) {
        const char *at = strstr(line, " @mimprof-ctl.");
        if (at == NULL)
            continue;
        long pid = strtol(at + 14, NULL, 10);
        char path[64];
        struct stat sb;
        snprintf(path, sizeof path, "/proc/%ld", pid);
        if (pid <= 0 || stat(path, &sb) != 0 || (getuid() != 0 && sb.st_uid != getuid()))
            continue;
        long holder;
        int fd = connect_pid(pid, &holder);
        if (fd < 0)
            continue;
        size_t len = 0;
        bool impostor, dropped;
        char *ans = ask(fd, "status\n", &len, holder == pid ? 0 : pid, &impostor, &dropped);
        close(fd);
        if (impostor)
            continue; /* not the process it names */
        const char *st = ans != NULL ? strstr(ans, "\nstate: ") : NULL;
        char state[16] = "?";
        if (st != NULL)
            sscanf(st + 8, "%15s", state);
        free(ans);
        char cmd[256] = "";
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int cfd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r = cfd >= 0 ? read(cfd, cmd, sizeof cmd - 1) : -1;
        if (cfd >= 0)
            close(cfd);
        for (ssize_t i = 0; i < r - 1; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        printf("%-8ld %-8s %s\n", pid, state, cmd);
    }
    fclose(f);
    return MPT_EXIT_OK;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "mimprof ctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see mimprof ctl --help)\n");
    return MPT_EXIT_USAGE;
}

int mpt_cmd_ctl(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        mpt_usage(stdout, "ctl");
        return MPT_EXIT_OK;
    }
    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return list();
    if (argc < 3)
        return usage_error("wants PID COMMAND or list%s", "");
    char *end;
    long pid = strtol(argv[1], &end, 10);
    if (*end != '\0' || pid <= 0)
        return usage_error("'%s' is not a process id", argv[1]);
    const char *cmd = argv[2];
    char req[MP_PROF_CONTROL_MAX_REQUEST + 2];
    const char *out = NULL;
    uint64_t v;
    if (strcmp(cmd, "status") == 0 || strcmp(cmd, "stop") == 0) {
        if (argc != 3)
            return usage_error("%s takes no argument", cmd);
        snprintf(req, sizeof req, "%s\n", cmd);
    } else if (strcmp(cmd, "start") == 0) {
        static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                             {"every", required_argument, NULL, 'e'},
                                             {NULL, 0, NULL, 0}};
        size_t off = (size_t)snprintf(req, sizeof req, "start");
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc - 2, argv + 2, ":i:e:", opts, NULL)) != -1) {
            if (c == 'i' && !mpt_parse_size(optarg, &v))
                return usage_error("--interval wants a size like 64k, not '%s'", optarg);
            if (c == 'e' && !mpt_parse_duration_ms(optarg, &v))
                return usage_error("--every wants a duration like 10s, not '%s'", optarg);
            if (c != 'i' && c != 'e')
                return usage_error("start: bad option '%s'", argv[2 + optind - 1]);
            off += (size_t)snprintf(req + off, sizeof req - off, " %s=%.100s",
                                    c == 'i' ? "interval" : "every", optarg);
        }
        if (optind != argc - 2)
            return usage_error("start: unexpected '%s'", argv[2 + optind]);
        snprintf(req + off, sizeof req - off, "\n");
    } else if (strcmp(cmd, "report") == 0 || strcmp(cmd, "image") == 0) {
        if (argc != 5 || strcmp(argv[3], "-o") != 0)
            return usage_error("%s wants -o FILE", cmd);
        out = argv[4];
        snprintf(req, sizeof req, "%s\n", cmd);
    } else if (strcmp(cmd, "set") == 0) {
        if (argc != 5 || strcmp(argv[3], "interval") != 0)
            return usage_error("set wants: set interval SIZE%s", "");
        if (!mpt_parse_size(argv[4], &v))
            return usage_error("set interval wants a size like 64k, not '%s'", argv[4]);
        snprintf(req, sizeof req, "set interval=%.100s\n", argv[4]);
    } else {
        return usage_error("unknown command '%s' (status, start, stop, report, image, set)", cmd);
    }
    long target = pid, holder = 0;
    size_t len = 0;
    bool impostor, dropped;
    char *ans;
    for (int tries = 1;; tries++) {
        int fd = open_target(pid, &target, &holder);
        if (fd < 0)
            return EXIT_ERR;
        ans = ask(fd, req, &len, holder == target ? 0 : target, &impostor, &dropped);
        close(fd);
        if (!dropped)
            break;
        if (tries == 10) {
            fprintf(stderr, "mimprof ctl: pid %ld's control socket closed without an answer\n",
                    target);
            return EXIT_ERR;
        }
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    if (impostor)
        fprintf(stderr,
                "mimprof ctl: the control socket of pid %ld is held by pid %ld: not "
                "trusted\n",
                target, holder);
    if (ans == NULL)
        return EXIT_ERR;
    int rc = finish(target, ans, len, out, strcmp(cmd, "report") == 0);
    free(ans);
    return rc;
}
