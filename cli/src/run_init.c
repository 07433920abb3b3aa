/* SPDX-License-Identifier: MIT */
/* `mimprof run` as pid 1 of its PID namespace: a container's entrypoint
 * (`ENTRYPOINT ["mimprof", "run", ...]`), `unshare --pid --fork`.
 *
 * There the kernel re-parents every orphaned process of the namespace to
 * it, and only it can reap them: a process whose parent ended before it
 * would stay a zombie (a slot of the pid table, a `Z` in ps) until the
 * container ends. So, as tini does, pid 1 reaps every child that ends,
 * whatever its parent was, while it waits for the command; SIGCHLD comes
 * through a signalfd into the same poll() that waits for the command and
 * relays the collector's messages (run_collector.c). The signals a
 * container runtime sends reach the command as they do outside a
 * namespace (run_exec.c forwards them), and `mimprof run` exits with the
 * command's status, which is then the container's. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

bool mpt_run_is_init(void) { return getpid() == 1; }

int mpt_run_init_chld_fd(void)
{
    if (!mpt_run_is_init())
        return -1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    /* blocked, it queues for the descriptor; the command and the
     * collector unblock it in their own processes (run_exec.c, run_collector.c) */
    if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0)
        return -1;
    return signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
}

bool mpt_run_init_reap(int chld_fd, mpt_run_coll *rc, pid_t child, int *status)
{
    struct signalfd_siginfo si;
    while (read(chld_fd, &si, sizeof si) == (ssize_t)sizeof si)
        ;
    bool ended = false;
    int st;
    pid_t w;
    /* every ended child at once: SIGCHLDs of several children may merge */
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w == child) {
            *status = st;
            ended = true;
        } else if (w == rc->pid) {
            rc->pid = 0; /* reaped here: never waited for again */
        }
    }
    return ended;
}
