/* SPDX-License-Identifier: MIT */
/* Internal contract between the LD_PRELOAD objects of mimprof-cli
 * (libmimprof-preload-mimalloc.so / -jemalloc.so, built from ../preload/)
 * and the `mimprof run` command: how a preloaded process is told to
 * profile itself and where its reports go. Not installed.
 *
 * How it hooks in: preload_runtime.c is compiled into each preload object
 * (cli/meson.build adds runtime/'s sources to the preload targets);
 * preload/preload.c only defines the allocator and registers the object's
 * frames (constructor priority 101), then the runtime's
 * constructor (102) reads the environment (rt_env.h: once, from the
 * initial environment, never written) and decides for this process:
 *
 *  - MIMPROF_DISABLE=1: nothing (the allocator only);
 *  - MIMPROF_DORMANT=1: runtime mode, configured and checked as below,
 *    but no session, thread, handler or file until one is started
 *    (through the profiling library's control,
 *    <mimprof/profiling_control.h>); until then the allocation and free
 *    paths are the sampling allocator's idle fast path (its countdown is refilled with
 *    a fixed idle value, never drawn);
 *  - MIMPROF_ROOT_PID set (by `mimprof run`) and not this pid: a program
 *    executed by a child process, profiled only with MIMPROF_FOLLOW_EXEC=1;
 *    the root pid itself, also after an exec replaced it, is profiled;
 *  - no MIMPROF_EVERY and no PYROSCOPE_SERVER_ADDRESS: the bare preload,
 *    the same runtime with no period: one report at exit, no reporter
 *    thread, no signal handler, default output mimprof.%p.pb;
 *  - otherwise runtime mode, below.
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
 *  - each report goes to MIMPROF_OUTPUT (when uploading to Pyroscope, only
 *    if MIMPROF_OUTPUT is set), named and written by rt_output.h: a
 *    directory receives heap.<pid>.<seq>.pb.gz (and the window's peak
 *    next to it, heap.<pid>.<seq>.peak.pb.gz: rt_peak.h), seq = 0, 1, 2, ... per
 *    process (an exec'd program keeps its pid and continues the series);
 *    any other value is a file name pattern with %p, %n, %t and %%.
 *    Written atomically, never over anything but a regular file;
 *  - fork(): with MIMPROF_FOLLOW_FORK=1 (default) the child starts its own
 *    session and reporter (its files carry its pid; with a pattern
 *    without %p it is not profiled, and the first fork says so); with 0
 *    the child is not profiled (the core ends the parent's session in
 *    every child);
 *  - under `mimprof run`'s collector (MIMPROF_COLLECTOR: rt_collector.h)
 *    reports in directory mode and uploads are handed to it, messages
 *    too, and no duplicate of stderr is held; a report it does not take
 *    is written by the process itself (and not uploaded), and says so;
 *    the process keeps no descriptor of ours (the collector hosts its
 *    control socket: rt_ctlhost.h);
 *  - exec(): see MIMPROF_ROOT_PID above. The environment is never edited:
 *    programs executed by unprofiled children keep the preload loaded, as
 *    an allocator with no session.
 *
 * Pyroscope. With PYROSCOPE_SERVER_ADDRESS set, the runtime
 * dlopen()s libmimprof-pyroscope (the package arrow is pyroscope ->
 * profiling: nothing here links it) -- $MIMPROF_PYROSCOPE_LIB, else the
 * file next to this preload object, else the dynamic loader's search --
 * and builds the upload configuration at start with
 * mp_pyro_config_from_env() (PYROSCOPE_APPLICATION_NAME required; see the
 * adapter's README for every variable) and validates it. A failure (no
 * library, a bad name or tag) is one line on stderr; the runtime goes on
 * with its files, or leaves the process unprofiled when it writes none.
 * Then:
 *  - each process starts a *sink* agent (mp_pyro_agent_start with no
 *    backend) at its first report, with every signal blocked so that its
 *    threads never take the program's signals, and hands it every report
 *    (mp_pyro_agent_submit: the pprof bytes and the window [previous
 *    report, now), so alloc_* values are neither lost nor counted twice;
 *    copied and gzipped there, uploaded on the agent's thread: the program
 *    is never blocked on the network). Periodic reports fall on wall-clock
 *    multiples of the period;
 *  - at exit, after the final report, mp_pyro_agent_stop() delivers what
 *    is queued within MIMPROF_PYROSCOPE_FLUSH_DEADLINE (default 5 s: the
 *    longest an exit waits for an unreachable server), the rest is spooled
 *    (MIMPROF_PYROSCOPE_SPOOL_DIR) or counted as lost. When a profile was
 *    lost or spooled, or a request failed, one line on stderr gives the
 *    counters ("mimprof: pyroscope: pid N: U of T profiles uploaded, L lost
 *    (queue full, rejected, retries exhausted, stop deadline, spool i/o,
 *    not queued), S spooled; failed requests: ...; last error: ..."); with
 *    MIMPROF_PYROSCOPE_SUMMARY=1 (set by mimprof run) the process started by
 *    it also says when everything was uploaded. On a fatal signal the
 *    last report is submitted and flushed within the handler's 2 s;
 *  - fork(): a followed child forgets the parent's agent (its threads do
 *    not exist in the child) and starts its own at its first report, with
 *    no spool (the parent holds the directory's lock). Children upload to
 *    the same series as the parent (same service_name and tags, no pid
 *    label); a real server keeps one profile per series and timestamp,
 *    so under `mimprof run` the collector uploads instead, one merged
 *    profile per window (rt_collector.h). With MIMPROF_FOLLOW_FORK=0
 *    children upload nothing;
 *  - MIMPROF_QUIET=1 lowers the adapter's log level to error (unless
 *    MIMPROF_PYROSCOPE_LOG_LEVEL says otherwise) and silences the summary.
 *
 * Variables (the table, with defaults: rt_env.c and the tool's README):
 *   MIMPROF_EVERY        report period: 10s, 500ms, 1m; 0 = only at exit
 *                        and on SIGUSR2. Its presence selects runtime mode.
 *                        Unset in a bare Pyroscope preload: the upload
 *                        interval (PYROSCOPE_UPLOAD_INTERVAL, default 10s).
 *   MIMPROF_OUTPUT       as above; default ./mimprof-out/, none when
 *                        uploading
 *   MIMPROF_FOLLOW_FORK  1 | 0 (default 1)
 *   MIMPROF_FOLLOW_EXEC  1 | 0 (default 0 under MIMPROF_EVERY, else 1)
 *   MIMPROF_QUIET        1: no message on stderr
 *   MIMPROF_REPORT_ABOVE a report (and an image) at once when the memory
 *                        crosses SIZE or N% of the cgroup's limit (rt_watch.h)
 *   MIMPROF_IMAGE, MIMPROF_IMAGE_EVERY, MIMPROF_IMAGE_ON_EXIT
 *                        heap images: SIGUSR2, periodic and at exit
 *                        (image_runtime.h)
 *   PYROSCOPE_SERVER_ADDRESS, PYROSCOPE_APPLICATION_NAME, PYROSCOPE_TAGS,
 *   PYROSCOPE_BASIC_AUTH_USER, PYROSCOPE_BASIC_AUTH_PASSWORD,
 *   PYROSCOPE_AUTH_TOKEN, PYROSCOPE_TENANT_ID, PYROSCOPE_UPLOAD_INTERVAL,
 *   MIMPROF_PYROSCOPE_{PROTOCOL,SPOOL_DIR,CA_PATH,FLUSH_DEADLINE,LOG_LEVEL}
 *                        the upload configuration (mp_pyro_config_from_env)
 *   MIMPROF_PYROSCOPE_LIB      the libmimprof-pyroscope to dlopen()
 *   MIMPROF_PYROSCOPE_SUMMARY  1: a line at exit also when nothing was lost
 *   MIMPROF_STATUS_DIR   a private directory `mimprof run` made: the
 *                        upload summary of each process goes to the file
 *                        pyroscope.<pid> there, and the command prints it
 *                        after the program ended (a path, not a
 *                        descriptor: it works whatever the program did
 *                        with its descriptors). Unset: the summary is a
 *                        message like the others.
 * Messages (errors, a bare preload's summary) go to a close-on-exec
 * duplicate of stderr taken at start, moved to the top of the descriptor
 * range, and only while it still is that file (rt_common.h).
 * A malformed value is reported on stderr and the process runs unprofiled
 * (for the upload configuration: without uploads, see above).
 */
#ifndef MIMPROF_TOOL_PRELOAD_RUNTIME_H
#define MIMPROF_TOOL_PRELOAD_RUNTIME_H

#include <stdbool.h>

/* Reads the environment and, in runtime mode, starts the session and the
 * reporter thread. Returns 1 when profiling, 0 when not in runtime mode
 * (MIMPROF_EVERY unset), -1 when the session could not start (a message on
 * stderr unless MIMPROF_QUIET=1). Idempotent. Called by the runtime's own
 * constructor; a preload may also call it first thing in its constructor
 * and skip its own session when it returns nonzero. */
int mpt_rt_start(void);

/* Writes the final report and ends the session. Registered with atexit()
 * by mpt_rt_start(); callable directly (idempotent). */
void mpt_rt_stop(void);

/* Asks the reporter thread for a report now (what SIGUSR2 does).
 * Async-signal-safe. */
void mpt_rt_request(void);

/* Defined by the preload object (../preload/preload.c): in the dormant
 * object, points malloc and free at the sampling allocator (`on`) or at
 * the raw provider, and returns true; in the others, which always sample,
 * does nothing and returns false. */
bool mp_preload_set_sampling(bool on);

/* Defined by the preload object: gives the OS back what the calling
 * thread's heap holds free (mimalloc keeps freed pages dirty: private
 * memory in each process of a forking server); a no-op for a provider
 * without such a call. The reporter thread calls it after each report. */
void mp_preload_trim_thread(void);

#endif
