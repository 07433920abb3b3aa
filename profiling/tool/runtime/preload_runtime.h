/* Internal contract between the LD_PRELOAD objects of mimprof-profiling
 * (libmimprof-preload-mimalloc.so / -jemalloc.so, built from preload/)
 * and the `mimprof run` command: how a preloaded process is told to
 * profile itself and where its reports go. Not installed.
 *
 * How it hooks in: preload_runtime.c is compiled into each preload object
 * (profiling/meson.build adds tool/runtime's sources to the preload
 * targets). Its constructor has priority 101, so it runs before the
 * preload's own constructor (default priority). When MIMPROF_EVERY is set
 * -- `mimprof run` always sets it -- the runtime owns the session: it
 * starts it and sets MIMPROF_DISABLE=1 (unless already set) so that the
 * preload's single-report session (preload/preload.c) stays off in this
 * process and in the programs it runs; the preload still registers its
 * code as profiler frames. Without MIMPROF_EVERY the runtime does nothing
 * and the preload behaves as documented in preload/preload.c.
 *
 * In runtime mode:
 *
 *  - one profiling session (the public API of <mimprof/profiling.h>),
 *    configured from the same variables the preload reads (MIMPROF_INTERVAL,
 *    MIMPROF_SEED, MIMPROF_STACK_DEPTH, MIMPROF_SYMBOLIZE);
 *  - one reporter thread writes a report every MIMPROF_EVERY, on SIGUSR2
 *    (when the program had not set its own SIGUSR2 disposition when the
 *    runtime started), a final one at exit (atexit) and, when possible,
 *    one when the process is killed by a signal it did not handle
 *    (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE,
 *    SIGILL: the handler waits at most 2 s for that report, then the
 *    signal takes its default action);
 *  - each report goes to MIMPROF_OUTPUT: a directory (existing, or a value
 *    ending in '/': created) receives heap.<pid>.<seq>.pb.gz, seq = 0, 1,
 *    2, ... per process; any other value is a file name pattern with %p
 *    (pid), %n (seq), %t (Unix time) and %%. Names ending in ".gz" are
 *    gzip-compressed (as pprof tools expect), others are raw pprof. Files
 *    are written under a temporary name and renamed, so a reader never
 *    sees a partial file. The writer's buffers are mmap()ed: it does not
 *    appear in the profile it writes;
 *  - fork(): with MIMPROF_FOLLOW_FORK=1 (default) the child starts its own
 *    session and reporter (its files carry its pid); with 0 the child is
 *    not profiled (the core ends the parent's session in every child);
 *  - exec(): with MIMPROF_FOLLOW_EXEC=0 (default) the runtime removes its
 *    preload object from LD_PRELOAD and its variables (all above but
 *    MIMPROF_DISABLE) from the environment at start, so programs the
 *    process executes run unprofiled; with 1 they inherit it and profile
 *    themselves (an exec'd image keeps its pid: in directory mode its seq
 *    continues after the files already there).
 *
 * Variables of runtime mode (besides the preload's):
 *   MIMPROF_EVERY        report period: 10s, 500ms, 1m; 0 = only at exit
 *                        and on SIGUSR2. Its presence selects runtime mode.
 *   MIMPROF_OUTPUT       as above; default ./mimprof-out/
 *   MIMPROF_FOLLOW_FORK  1 | 0 (default 1)
 *   MIMPROF_FOLLOW_EXEC  1 | 0 (default 0)
 *   MIMPROF_QUIET        1: no message on stderr
 * A malformed value is reported on stderr and the process runs unprofiled.
 *
 * Extension point: the Pyroscope adapter (issue 7) will upload the same
 * reports; it is expected to hook in here (MIMPROF_PYROSCOPE_* variables
 * read at start, and a second sink next to the file writer in the
 * reporter thread), not in the preload objects.
 */
#ifndef MIMPROF_TOOL_PRELOAD_RUNTIME_H
#define MIMPROF_TOOL_PRELOAD_RUNTIME_H

/* Reads the environment and, in runtime mode, starts the session and the
 * reporter thread. Returns 1 when profiling, 0 when not in runtime mode
 * (MIMPROF_EVERY unset), -1 when the session could not start (a message on
 * stderr unless MIMPROF_QUIET=1). Idempotent. Called by the runtime's own
 * constructor; a preload may also call it first thing in its constructor
 * and skip its own session when it returns nonzero. */
int mp_preload_runtime_start(void);

/* Writes the final report and ends the session. Registered with atexit()
 * by mp_preload_runtime_start(); callable directly (idempotent). */
void mp_preload_runtime_stop(void);

/* Asks the reporter thread for a report now (what SIGUSR2 does).
 * Async-signal-safe. */
void mp_preload_runtime_request(void);

#endif
