/* SPDX-License-Identifier: MIT */
/* The program's view of the dispositions the runtime took (rt_signals.h).
 *
 * State per signal, under one spin lock taken with every signal blocked
 * (so a handler of this thread never finds it held): `taken` (the runtime
 * wants the signal while the program's view is SIG_DFL), `view` (what the
 * program last set), `ours` (the runtime's handler). The kernel has `ours`
 * exactly when `view` is SIG_DFL. Everything here is async-signal-safe:
 * programs call sigaction() from handlers. */
#define _GNU_SOURCE
#include "rt_signals.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* glibc's own entry point: what sigaction() is without this preload. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static struct {
    atomic_flag lock;
    atomic_bool taken[NSIG];
    struct sigaction view[NSIG];
    struct sigaction ours[NSIG];
} S = {.lock = ATOMIC_FLAG_INIT};

static void lock(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, saved);
    while (atomic_flag_test_and_set_explicit(&S.lock, memory_order_acquire))
        ;
}

static void unlock(const sigset_t *saved)
{
    atomic_flag_clear_explicit(&S.lock, memory_order_release);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

static bool taken(int sig)
{
    return sig > 0 && sig < NSIG && atomic_load_explicit(&S.taken[sig], memory_order_acquire);
}

void mpt_sig_take(int sig, void (*handler)(int), int flags)
{
    sigset_t saved;
    lock(&saved);
    struct sigaction now;
    if (!taken(sig) && __sigaction(sig, NULL, &now) == 0 && now.sa_handler == SIG_DFL) {
        S.view[sig] = now;
        memset(&S.ours[sig], 0, sizeof S.ours[sig]);
        S.ours[sig].sa_handler = handler;
        S.ours[sig].sa_flags = flags;
        sigemptyset(&S.ours[sig].sa_mask);
        if (__sigaction(sig, &S.ours[sig], NULL) == 0)
            atomic_store_explicit(&S.taken[sig], true, memory_order_release);
    }
    unlock(&saved);
}

void mpt_sig_after_fork(void) { atomic_flag_clear(&S.lock); }

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act,
                                                     struct sigaction *old)
{
    if (!taken(sig))
        return __sigaction(sig, act, old);
    sigset_t saved;
    lock(&saved);
    struct sigaction prev = S.view[sig];
    int rc = 0;
    if (act != NULL) {
        /* SIG_DFL: the runtime's handler again; anything else for real. */
        rc = __sigaction(sig, act->sa_handler == SIG_DFL ? &S.ours[sig] : act, NULL);
        if (rc == 0)
            S.view[sig] = *act;
    }
    unlock(&saved);
    if (rc == 0 && old != NULL)
        *old = prev;
    return rc;
}

/* signal() as glibc's (BSD semantics: the signal blocked in its handler,
 * system calls restarted), through sigaction() above. */
static __sighandler_t bsd_like(int sig, __sighandler_t h)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    if (sig > 0 && sig < NSIG)
        sigaddset(&act.sa_mask, sig);
    act.sa_flags = SA_RESTART;
    return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

typedef __sighandler_t (*disp_fn)(int, __sighandler_t);

/* For a signal the runtime did not take: the C library's `name` (which
 * also knows siginterrupt()'s flags), looked up once into *cache; NULL
 * when the runtime took the signal. */
static disp_fn passthrough(int sig, const char *name, disp_fn *cache)
{
    if (taken(sig))
        return NULL;
    if (*cache == NULL)
        *(void **)cache = dlsym(RTLD_NEXT, name);
    return *cache;
}

__attribute__((visibility("default"))) __sighandler_t signal(int sig, __sighandler_t h)
{
    static disp_fn real;
    disp_fn f = passthrough(sig, "signal", &real);
    if (f != NULL)
        return f(sig, h);
    return bsd_like(sig, h);
}

__attribute__((visibility("default"))) __sighandler_t bsd_signal(int sig, __sighandler_t h)
{
    return signal(sig, h);
}

/* System V semantics: one-shot, not blocked in its handler. */
__attribute__((visibility("default"))) __sighandler_t sysv_signal(int sig, __sighandler_t h)
{
    static disp_fn real;
    disp_fn f = passthrough(sig, "sysv_signal", &real);
    if (f != NULL)
        return f(sig, h);
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = h;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESETHAND | SA_NODEFER;
    return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

__attribute__((visibility("default"))) __sighandler_t sigset(int sig, __sighandler_t disp)
{
    static disp_fn real;
    disp_fn f = passthrough(sig, "sigset", &real);
    if (f != NULL)
        return f(sig, disp);
    sigset_t one, old_mask;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct sigaction act, old;
    if (disp == SIG_HOLD) {
        if (pthread_sigmask(SIG_BLOCK, &one, &old_mask) != 0 || sigaction(sig, NULL, &old) != 0)
            return SIG_ERR;
    } else {
        memset(&act, 0, sizeof act);
        act.sa_handler = disp;
        sigemptyset(&act.sa_mask);
        if (sigaction(sig, &act, &old) != 0 || pthread_sigmask(SIG_UNBLOCK, &one, &old_mask) != 0)
            return SIG_ERR;
    }
    return sigismember(&old_mask, sig) ? SIG_HOLD : old.sa_handler;
}
