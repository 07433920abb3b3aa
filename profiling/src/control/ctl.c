/* SPDX-License-Identifier: MIT */
/* The `mimprof ctl` protocol on one connection of the control's loop
 * (proto.h for the protocol, conn.h for the loop): the peer's user is
 * checked at accept, the request line parsed, and the answer built at
 * once, on the control's thread, from the session operations in force
 * (control.h: the host's hooks, or session.c's).
 *
 * Memory: answers are in the connection; a report's buffer comes from
 * the profiler (allocated under its recursion guard), an image is
 * mmap()ed: nothing of this thread is sampled as the program's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/profiling.h>

#include "control.h"
#include "proto.h"

static bool g_told_refused; /* another user's connection was logged (server thread) */

void mpc_ctl_after_fork(void) { g_told_refused = false; }

/* ---- answers ---------------------------------------------------------- */

static void answer_error(mpc_conn *c, const char *why)
{
    mpc_conn_head(c, "error: %s\n", why[0] != '\0' ? why : "failed");
}

static void answer_status(mpc_conn *c)
{
    mp_prof_control_state st;
    memset(&st, 0, sizeof st);
    mpc_ops()->state(mpc_ops()->ctx, &st);
    st.upload[sizeof st.upload - 1] = '\0';
    mp_prof_stats ps;
    mp_prof_diagnostics(&ps);
    char last[64] = "none";
    if (st.last_report_ns != 0) {
        time_t t = (time_t)(st.last_report_ns / 1000000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    char every[32];
    if (st.every_ms == 0)
        snprintf(every, sizeof every, "0 (on request%s)", st.report_at_exit ? " and at exit" : "");
    else
        snprintf(every, sizeof every, "%llums", (unsigned long long)st.every_ms);
    const char *http = mpc_http_name();
    unsigned long long drops = ps.dropped_registration + ps.dropped_teardown +
                               ps.dropped_overflow_full + ps.dropped_live_table_full;
    mpc_conn_head(c,
                  "ok\npid: %ld\nstate: %s\ninterval: %llu\nnext interval: %llu\nevery: %s\n"
                  "samples: %llu\nlive samples: %llu\ndrops: %llu\nreports: %u\n"
                  "last report: %s\noutput: %s\nupload: %s\nhttp: %s\n",
                  (long)getpid(), st.running ? "running" : "dormant",
                  (unsigned long long)st.interval, (unsigned long long)st.next_interval, every,
                  (unsigned long long)ps.samples_taken, (unsigned long long)ps.live_samples, drops,
                  st.reports, last, st.output != NULL && st.output[0] != '\0' ? st.output : "none",
                  st.upload[0] != '\0' ? st.upload : "off", http != NULL ? http : "off");
}

static void free_report(void *p, size_t len)
{
    (void)len;
    mp_prof_buffer_free(p);
}

static void unmap(void *p, size_t len) { munmap(p, len); }

/* A heap image: written into a private directory (the writer replaces
 * files by rename, so it needs one), mapped, removed, and sent. */
static void answer_image(mpc_conn *c)
{
    char why[512];
    char dir[] = "/tmp/mimprof-ctl.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        snprintf(why, sizeof why, "no private directory in /tmp: %s", strerror(errno));
        answer_error(c, why);
        return;
    }
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/heap.mpimg", dir);
    why[0] = '\0';
    if (mpc_ops()->image(mpc_ops()->ctx, path, why, sizeof why) != MP_PROF_OK) {
        rmdir(dir);
        answer_error(c, why);
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    void *map = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0)
        map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (fd >= 0)
        close(fd);
    unlink(path);
    rmdir(dir);
    if (map == MAP_FAILED) {
        answer_error(c, "the image was written but cannot be read back");
        return;
    }
    mpc_conn_head(c, "ok %llu\n", (unsigned long long)sb.st_size);
    mpc_conn_body(c, map, (size_t)sb.st_size, unmap);
}

/* One request line (without its '\n'). */
static void answer(mpc_conn *c, const char *line, size_t len)
{
    mpc_ctl_req req;
    char why[512] = "";
    const mp_prof_control_hooks *ops = mpc_ops();
    if (mpc_ctl_parse(line, len, &req, why, sizeof why) != 0) {
        answer_error(c, why);
        return;
    }
    switch (req.cmd) {
    case MPC_CTL_STATUS:
        answer_status(c);
        return;
    case MPC_CTL_START:
        if (ops->start(ops->ctx, req.interval, req.has_every ? (int64_t)req.every_ms : -1, why,
                       sizeof why) != MP_PROF_OK)
            answer_error(c, why);
        else
            answer_status(c);
        return;
    case MPC_CTL_STOP:
        if (ops->stop(ops->ctx, why, sizeof why) != MP_PROF_OK)
            answer_error(c, why);
        else
            answer_status(c);
        return;
    case MPC_CTL_REPORT: {
        uint8_t *buf = NULL;
        size_t blen = 0;
        if (ops->report(ops->ctx, &buf, &blen, NULL, NULL, why, sizeof why) != MP_PROF_OK) {
            answer_error(c, why);
            return;
        }
        mpc_conn_head(c, "ok %zu\n", blen);
        mpc_conn_body(c, buf, blen, free_report);
        return;
    }
    case MPC_CTL_IMAGE:
        answer_image(c);
        return;
    case MPC_CTL_SET:
        ops->set_interval(ops->ctx, req.interval);
        answer_status(c);
        return;
    }
}

/* The ctl protocol on a connection: answers once a full line is in. */
static bool ctl_input(mpc_conn *c)
{
    const char *nl = memchr(c->in, '\n', c->in_len);
    if (nl == NULL) {
        if (c->in_len > MPC_CTL_MAX_LINE) {
            answer_error(c, "request longer than 512 bytes");
            return true;
        }
        return false;
    }
    answer(c, c->in, (size_t)(nl - c->in));
    return true;
}

/* Only this process's user, and root. */
static bool ctl_accept(mpc_conn *c)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
        answer_error(c, "cannot identify the peer");
        return false;
    }
    uid_t me = geteuid();
    if (cr.uid == me || cr.uid == 0)
        return true;
    if (!g_told_refused) {
        g_told_refused = true;
        mpc_say(true,
                "mimprof: ctl: refused a connection from uid %ld (pid %ld): only uid %ld "
                "and root may control pid %ld (logged once)\n",
                (long)cr.uid, (long)cr.pid, (long)me, (long)getpid());
    }
    answer_error(c, "permission denied: not this process's user");
    return false;
}

const mpc_conn_proto mpc_ctl_proto = {
    .max_in = MPC_CTL_MAX_LINE + 1,
    .busy = "error: busy\n", /* a ninth connection: never NULL (conn.c sends it) */
    .on_accept = ctl_accept,
    .on_input = ctl_input,
};
