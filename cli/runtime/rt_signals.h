/* SPDX-License-Identifier: MIT */
/* The runtime's signal handlers, and the program's view of its own
 * dispositions. Not installed.
 *
 * The runtime takes a few signals while the program leaves them at their
 * default action: SIGUSR2 (a report) and the fatal ones (a last report,
 * then the default action). The program must not see that: Python, for
 * one, installs its SIGINT handler only when it finds SIG_DFL, and
 * faulthandler restores the handler it found. So, in the manner of the
 * JVM's libjsig, the preload interposes sigaction(), signal(),
 * bsd_signal(), sysv_signal() and sigset(), and for a signal the runtime
 * took:
 *   - the program reads back exactly what it last set (at first, what the
 *     kernel had when the runtime started: SIG_DFL), never the runtime's
 *     handler;
 *   - setting a handler or SIG_IGN installs it for real, and the runtime
 *     steps aside (the program's handler runs directly, exactly as it
 *     would without the profiler);
 *   - setting SIG_DFL again gives the signal back to the runtime.
 * Signals the runtime did not take pass straight through. The signal mask
 * is never changed (the runtime's threads block every signal from birth,
 * so process-directed signals always go to the program's threads). What
 * the program can still notice: the SigCgt line of /proc/self/status, and
 * that SIGUSR2 at its default action asks for a report instead of ending
 * the process (the one documented exception). */
#ifndef MIMPROF_TOOL_RT_SIGNALS_H
#define MIMPROF_TOOL_RT_SIGNALS_H

/* Installs `handler` (with `flags`, an empty sa_mask) for `sig` if the
 * program leaves it at SIG_DFL now; from then on the program sees its own
 * view of `sig` as above. */
void mpt_sig_take(int sig, void (*handler)(int), int flags);

/* In a fork child (the lock may have been held by another thread). */
void mpt_sig_after_fork(void);

#endif
