/* SPDX-License-Identifier: MIT */
/* The process's control with a host (mp_prof_control_options::host,
 * <mimprof/profiling_control.h>): no socket, no pipe of its own, its
 * connections handed over by a test host -- one end of a socketpair per
 * connection, the test the client on the other end. What is checked:
 * answers, concurrent connections, the busy answer, that opening adds no
 * descriptor, that close wakes the host (and only the host), the
 * refusals, a host that goes away, and a forked child served through the
 * same host. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling_control.h>

#include "helpers.h"

/* ---- the test host ---------------------------------------------------- */

enum { QMAX = 32 };

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int queue[QMAX]; /* handed over at the next take() */
    int nq;
    bool woken; /* a wake() not yet seen by take() */
    bool gone;  /* take() returns -1 */
    unsigned wakes;
    unsigned blocked; /* take(-1) calls that found nothing */
    unsigned takes;
    unsigned refused; /* take() calls that returned -1 */
} h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int host_take(void *ctx, int *fds, int max, int timeout_ms)
{
    cr_assert_eq(ctx, &h);
    pthread_mutex_lock(&h.mu);
    h.takes++;
    if (timeout_ms < 0 && h.nq == 0 && !h.woken && !h.gone) {
        h.blocked++;
        pthread_cond_broadcast(&h.cv); /* the test may wait for this */
    }
    while (timeout_ms < 0 && h.nq == 0 && !h.woken && !h.gone)
        pthread_cond_wait(&h.cv, &h.mu);
    int n = -1;
    h.refused += h.gone;
    if (!h.gone) {
        h.woken = false;
        n = h.nq < max ? h.nq : max;
        memcpy(fds, h.queue, (size_t)n * sizeof *fds);
        memmove(h.queue, h.queue + n, (size_t)(h.nq - n) * sizeof *h.queue);
        h.nq -= n;
    }
    pthread_cond_broadcast(&h.cv); /* the test may wait for takes */
    pthread_mutex_unlock(&h.mu);
    return n;
}

static void host_wake(void *ctx)
{
    cr_assert_eq(ctx, &h);
    pthread_mutex_lock(&h.mu);
    h.wakes++;
    h.woken = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
}

static const mp_prof_control_host g_host = {.ctx = &h, .take = host_take, .wake = host_wake};

/* In a forked child: the parent's waiters are not here (run before the
 * control's own handler, which is registered later, at the first open). */
static void host_after_fork(void)
{
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    h.nq = 0; /* the parent's: its copies stay open in the child */
    h.woken = h.gone = false;
    h.wakes = h.blocked = h.takes = h.refused = 0;
}

static void host_reset(void)
{
    static bool atfork;
    if (!atfork)
        atfork = pthread_atfork(NULL, NULL, host_after_fork) == 0;
    pthread_mutex_lock(&h.mu);
    for (int i = 0; i < h.nq; i++)
        close(h.queue[i]);
    h.nq = 0;
    h.woken = h.gone = false;
    h.wakes = h.blocked = h.takes = h.refused = 0;
    pthread_mutex_unlock(&h.mu);
}

/* A connection handed to the control; returns the client's end. */
static int hand(void)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct timeval tv = {30, 0};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_mutex_lock(&h.mu);
    cr_assert(h.nq < QMAX);
    h.queue[h.nq++] = sv[1];
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    return sv[0];
}

/* Waits until the control's thread has blocked in take(-1) `n` times
 * (idle: no connection left). */
static void wait_blocked(unsigned n)
{
    pthread_mutex_lock(&h.mu);
    while (h.blocked < n)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
}

/* Waits until the control's thread took every connection handed over. */
static void wait_taken(void)
{
    pthread_mutex_lock(&h.mu);
    while (h.nq > 0)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
}

/* Waits until the control's thread called take() `n` times in all. */
static void wait_takes(unsigned n)
{
    pthread_mutex_lock(&h.mu);
    while (h.takes < n)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
}

/* ---- clients ---------------------------------------------------------- */

static void send_str(int fd, const char *s)
{
    size_t n = strlen(s);
    cr_assert_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Everything the control answers on `fd` (malloc'd), then closes it. */
static char *read_all(int fd)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    cr_assert(b != NULL);
    for (;;) {
        ssize_t r = read(fd, b + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n + 1 == cap) {
            cap *= 2;
            b = realloc(b, cap);
            cr_assert(b != NULL);
        }
    }
    b[n] = '\0';
    close(fd);
    return b;
}

static long answer_pid(const char *a)
{
    const char *p = strstr(a, "\npid: ");
    cr_assert(p != NULL, "no pid in: %s", a);
    return strtol(p + 6, NULL, 10);
}

static void expect_status(int fd)
{
    char *a = read_all(fd);
    cr_assert(strncmp(a, "ok\n", 3) == 0, "answer: %s", a);
    cr_assert_eq(answer_pid(a), (long)getpid());
    cr_assert(strstr(a, "\nstate: dormant\n") != NULL, "%s", a);
    free(a);
}

static mp_prof_control *open_hosted(bool children)
{
    host_reset();
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    cr_assert_null(o.host, "no host by default");
    o.host = &g_host;
    o.serve_forked_children = children;
    o.config.seed = 3;
    mp_prof_control *c = NULL;
    char why[512] = "";
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_OK, "%s", why);
    return c;
}

/* Threads of this process: TSan's runtime adds one of its own when it
 * likes, so there the count is not the library's (-1: not counted). */
static int threads_now(void)
{
    if (TEST_TSAN)
        return -1;
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    cr_assert(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Whether anything listens on this process's own control socket name. */
static bool name_bound(void)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name((long)getpid(), a.sun_path, sizeof a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    bool ok = connect(fd, (struct sockaddr *)&a,
                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) == 0;
    close(fd);
    return ok;
}

/* ---- tests ------------------------------------------------------------ */

Test(control_host, status_answered_and_no_descriptor_of_its_own, .timeout = 60)
{
    enum { NFD = 1 << 16 };
    static bool before[NFD], idle[NFD];
    test_fds_now(before, NFD);
    mp_prof_control *c = open_hosted(false);
    wait_blocked(1);
    test_fds_now(idle, NFD);
    cr_assert(memcmp(before, idle, NFD) == 0, "the idle control holds a descriptor");
    cr_assert(!name_bound(), "a hosted control binds no socket");
    int fd = hand();
    send_str(fd, "status\n");
    expect_status(fd);
    /* served, closed: idle again in take(-1), without a descriptor */
    wait_blocked(2);
    test_fds_now(idle, NFD);
    cr_assert(memcmp(before, idle, NFD) == 0, "a served connection was left open");
    fd = hand();
    send_str(fd, "bogus\n");
    char *a = read_all(fd);
    cr_assert(strncmp(a, "error: unknown command", 22) == 0, "%s", a);
    free(a);
    mp_prof_control_close(c);
}

Test(control_host, concurrent_connections, .timeout = 60)
{
    mp_prof_control *c = open_hosted(false);
    int a = hand(), b = hand(), d = hand();
    send_str(a, "sta"); /* a partial request holds its slot ... */
    send_str(d, "status\n");
    expect_status(d); /* ... while the others are answered */
    send_str(b, "status\n");
    expect_status(b);
    int e = hand(); /* handed while connections are open: take(0) */
    send_str(e, "status\n");
    expect_status(e);
    send_str(a, "tus\n");
    expect_status(a);
    mp_prof_control_close(c);
}

Test(control_host, a_ninth_connection_is_answered_busy, .timeout = 60)
{
    mp_prof_control *c = open_hosted(false);
    int fds[8];
    for (int i = 0; i < 8; i++)
        fds[i] = hand(); /* silent: each holds a slot until its deadline */
    wait_taken();        /* in their slots before the next is taken */
    int extra = hand();
    char *a = read_all(extra);
    cr_assert_str_eq(a, "error: busy\n");
    free(a);
    for (int i = 0; i < 8; i++) {
        send_str(fds[i], "status\n");
        expect_status(fds[i]);
    }
    mp_prof_control_close(c);
}

Test(control_host, the_direct_socket_answers_busy_too, .timeout = 60)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    mp_prof_control *c = NULL;
    char why[512] = "";
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_OK, "%s", why);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = mp_prof_control_socket_name((long)getpid(), sa.sun_path, sizeof sa.sun_path);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int fds[9];
    for (int i = 0; i < 9; i++) {
        fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = {30, 0};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        cr_assert_eq(connect(fds[i], (struct sockaddr *)&sa, alen), 0);
        if (i < 8)
            send_str(fds[i], "sta"); /* accepted in this order: the ninth is the extra */
    }
    char *a = read_all(fds[8]);
    cr_assert_str_eq(a, "error: busy\n");
    free(a);
    for (int i = 0; i < 8; i++) {
        send_str(fds[i], "tus\n");
        expect_status(fds[i]);
    }
    mp_prof_control_close(c);
}

Test(control_host, close_wakes_the_host, .timeout = 60)
{
    int threads = threads_now();
    mp_prof_control *c = open_hosted(false);
    wait_blocked(1); /* in take(-1): only wake() gets it out */
    if (threads >= 0)
        cr_assert_eq(threads_now(), threads + 1);
    mp_prof_control_close(c);
    cr_assert_eq(h.wakes, 1u, "close calls wake() once");
    cr_assert_eq(threads_now(), threads, "the thread was joined");
    /* closed with connections open: woken out of its poll, they close */
    c = open_hosted(false);
    int fd = hand();
    send_str(fd, "sta");
    wait_takes(2); /* took it, and polls it */
    mp_prof_control_close(c);
    char *a = read_all(fd);
    cr_assert_str_eq(a, "", "closed unanswered");
    free(a);
    cr_assert_eq(threads_now(), threads);
}

Test(control_host, refusals, .timeout = 60)
{
    mp_prof_control_options o;
    mp_prof_control_options_init(&o);
    o.host = &g_host;
    o.http = "127.0.0.1:0";
    mp_prof_control *c = NULL;
    char why[512] = "";
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
    cr_assert(strstr(why, "http") != NULL && strstr(why, "host") != NULL, "%s", why);
    cr_assert_null(c);
    mp_prof_control_host half = {.ctx = &h, .take = host_take};
    o.http = NULL;
    o.host = &half;
    cr_assert_eq(mp_prof_control_open(&o, NULL, &c, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
    cr_assert(strstr(why, "wake") != NULL, "%s", why);
    /* nothing was left open: a valid one opens */
    c = open_hosted(false);
    mp_prof_control_close(c);
}

/* Waits until take() returned -1 and (where threads are counted) the
 * control's thread is gone. */
static void wait_ended(int threads)
{
    pthread_mutex_lock(&h.mu);
    while (h.refused == 0)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    while (threads_now() != threads) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

Test(control_host, a_host_gone_ends_the_thread, .timeout = 60)
{
    int threads = threads_now();
    mp_prof_control *c = open_hosted(false);
    wait_blocked(1);
    pthread_mutex_lock(&h.mu);
    h.gone = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    wait_ended(threads);
    mp_prof_control_close(c); /* joins the ended thread */
    /* gone while serving: the open connection is closed, unanswered */
    c = open_hosted(false);
    int fd = hand();
    send_str(fd, "sta");
    wait_takes(2);
    pthread_mutex_lock(&h.mu);
    h.gone = true;
    pthread_mutex_unlock(&h.mu);
    char *a = read_all(fd);
    cr_assert_str_eq(a, "");
    free(a);
    wait_ended(threads);
    mp_prof_control_close(c);
    c = open_hosted(false); /* and it opens again */
    int b = hand();
    send_str(b, "status\n");
    expect_status(b);
    mp_prof_control_close(c);
}

/* A forked child that serves, through the same host (reset by its own
 * fork handler): it answers with its own pid; one that does not serve
 * never calls the host. */
Test(control_host, forked_child_serves_through_the_host, .timeout = 60)
{
    if (TEST_TSAN)
        cr_skip_test("TSan cannot start a thread in the child of a multi-threaded fork; "
                     "run in the gcc and ASan trees");
    for (int serve = 0; serve < 2; serve++) {
        mp_prof_control *c = open_hosted(serve == 1);
        wait_blocked(1);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            int rc = 0;
            if (serve) {
                int fd = hand();
                if (send(fd, "status\n", 7, MSG_NOSIGNAL) != 7)
                    rc = 2;
                char *a = read_all(fd);
                if (strncmp(a, "ok\n", 3) != 0 || answer_pid(a) != (long)getpid())
                    rc = 3;
                free(a);
            } else {
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
                if (h.takes != 0)
                    rc = 4; /* no thread of the child asked the host */
            }
            mp_prof_control_close(c);
            _exit(rc);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d (serve %d)", st, serve);
        int fd = hand(); /* the parent's control is untouched */
        send_str(fd, "status\n");
        expect_status(fd);
        mp_prof_control_close(c);
    }
}
