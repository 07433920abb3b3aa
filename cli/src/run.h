/* SPDX-License-Identifier: MIT */
/* Internal to `mimprof run`: its options and the steps that run a command
 * with the profiling preload, one file each (run.c options, run_locate.c
 * objects, run_pyroscope.c uploads, run_env.c environment, run_exec.c the
 * child, run_summary.c what is printed after it). */
#ifndef MIMPROF_CLI_RUN_H
#define MIMPROF_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "collector.h"
#include "pyro_api.h"

/* Exit statuses of `mimprof run` besides the command's own (run_exec.c). */
enum { EXIT_CANNOT_RUN = 127, EXIT_OWN_ERROR = 125 };

typedef struct run_opts {
    uint64_t interval;     /* 0: the preload's default */
    const char *allocator; /* mimalloc | jemalloc */
    bool allocator_given;  /* --allocator: else the one the command links (run_pick.c) */
    const char *every;     /* as given, validated */
    uint64_t every_ms;
    const char *out_dir;
    const char *symbolize; /* none | functions | lines */
    const char *seed;
    const char *max_depth;
    const char *drop_frames; /* --drop-frames REGEX: MIMPROF_DROP_FRAMES, validated */
    bool keep_alloc_frames;  /* --keep-alloc-frames: MIMPROF_KEEP_ALLOC_FRAMES=1 */
    int follow_fork;         /* -1: default (yes) */
    int follow_exec;         /* -1: default (no) */
    bool quiet;
    bool dormant;       /* --dormant: MIMPROF_DORMANT=1 */
    const char *http;   /* --http ADDR:PORT: MIMPROF_HTTP */
    bool http_wildcard; /* --http-wildcard */
    bool every_given;
    bool out_given;
    /* Pyroscope */
    const char *pyro_url;
    const char *pyro_app;
    const char *pyro_tenant;
    const char *pyro_protocol;
    char *pyro_basic;  /* USER[:PASS] in basic_buf (the argv copy is blanked) */
    char *pyro_bearer; /* in bearer_buf, likewise */
    char basic_buf[4096];
    char bearer_buf[4096];
    const char *pyro_tags[64];
    int pyro_ntags;
    const char *pyro_instance; /* --instance NAME|none (NULL: the host name) */
    bool pyro;                 /* uploading: --pyroscope or PYROSCOPE_SERVER_ADDRESS */
    /* Heap images (MIMPROF_IMAGE*, runtime/image_runtime.h) */
    bool image_on_exit;
    const char *image_every;  /* as given, validated */
    const char *image_dir;    /* NULL: the output directory */
    const char *report_above; /* --report-above SIZE|N%, validated (MIMPROF_REPORT_ABOVE) */
    bool report_page;         /* --report-page: DIR/report.html at exit (mimprof report) */
    /* The collector (collector.h) */
    bool no_collector;   /* --no-collector: every process writes its own files */
    unsigned keep;       /* --keep N: reports kept per process (0: all) */
    uint64_t keep_bytes; /* --keep-size SIZE: total cap (0: none) */
} run_opts;

/* The label that keeps replicas of a service apart on Pyroscope
 * (--instance; run_pyroscope.c). */
#define MPT_INSTANCE_LABEL "hostname"

/* Runs cmd as a child with the preload configured by o (run_exec.c);
 * returns the exit status of `mimprof run`. */
int mpt_run_command(run_opts *o, char **cmd);

/* The collector as `mimprof run` sees it (run_collector.c). */
typedef struct {
    int notify; /* the collector's messages, or -1 */
    int ctl;    /* to the collector: the command's process ended, or -1 */
    pid_t pid;
    /* the collector's listening socket and pipe ends until it is forked
     * (mpt_run_collector_spawn) */
    int sock, pipe_out, pipe_in;
    mpt_coll_opts opts;
} mpt_run_coll;

/* Makes the collector's listening socket (a fresh abstract name) and
 * pipes (reports into abs_dir, NULL: none) and exports
 * MIMPROF_COLLECTOR=NAME:TOKEN. 0, or -1 (errno; nothing made). */
int mpt_run_collector_start(const run_opts *o, const char *abs_dir, mpt_run_coll *rc);
/* Forks the collector, after the command (which is so the first process
 * `mimprof run` starts: pid 2 in a new pid namespace, as without it). */
int mpt_run_collector_spawn(mpt_run_coll *rc);
/* Waits for `child`, relaying the collector's messages meanwhile. */
int mpt_run_collector_wait(mpt_run_coll *rc, pid_t child, int *status);
/* Tells the collector the command's process ended and relays its
 * messages until it has written that process's reports. */
void mpt_run_collector_end(mpt_run_coll *rc);

/* pid 1 of a PID namespace (run_init.c): the init of every orphan there. */
bool mpt_run_is_init(void);
/* As pid 1: SIGCHLD blocked and readable from the returned descriptor;
 * otherwise (or on failure) -1. */
int mpt_run_init_chld_fd(void);
/* As pid 1, after chld_fd was readable: reaps every ended child. True,
 * with *status, when `child` was among them; the collector (rc->pid),
 * when reaped, becomes 0 there. */
bool mpt_run_init_reap(int chld_fd, mpt_run_coll *rc, pid_t child, int *status);

/* Finds libmimprof-preload-<object>.so (run_locate.c): $MIMPROF_PRELOAD_DIR,
 * then next to this executable in the build tree, then in the install
 * prefix. Writes the real path into out; on failure lists the places
 * looked at in `looked`. */
int mpt_run_find_preload(const char *object, char *out, size_t outlen, char *looked,
                         size_t lookedlen);
#if MPT_HAVE_PYROSCOPE
/* Loads libmimprof-pyroscope into *api (run_locate.c): $MIMPROF_PYROSCOPE_LIB
 * alone when set; else next to the preload object, in the workspace build
 * tree, in the install prefix (libdir), then the dynamic loader's search.
 * On failure `looked` lists the places and `err` the loader's complaint
 * about a file that exists but did not load. */
int mpt_run_find_pyroscope(const char *preload, mpt_pyro_api *api, char *looked, size_t lookedlen,
                           char *err, size_t errlen);
#endif

/* Without --allocator: jemalloc when the command's executable or an
 * object it needs links libjemalloc (and the jemalloc preload exists), one
 * line on stderr saying so unless quiet (run_pick.c). */
void mpt_run_pick_allocator(run_opts *o, const char *cmd);
/* Whether `cmd` (found as execvp would) or an object it needs names
 * libjemalloc in DT_NEEDED; its name into lib. */
bool mpt_run_links_jemalloc(const char *cmd, char *lib, size_t liblen);

/* Checks the upload configuration -- the PYROSCOPE_* variables already
 * set, then the flags over them -- with the adapter's own rules, and
 * exports it for the preload (run_pyroscope.c). One line on stderr naming
 * the flag or variable and the rule on error. */
int mpt_run_setup_pyroscope(run_opts *o, const char *preload);

/* The preload's environment from o (run_env.c): LD_PRELOAD, MIMPROF_OUTPUT
 * (abs_dir/, or unset when NULL: uploads only) and the MIMPROF_* settings. */
int mpt_run_build_env(const run_opts *o, const char *preload, const char *abs_dir);
/* --image-*: MIMPROF_IMAGE (absolute, created), MIMPROF_IMAGE_EVERY and
 * MIMPROF_IMAGE_ON_EXIT (run_env.c); the error said on stderr. */
int mpt_run_image_env(const run_opts *o);

/* The private status directory of the profiled processes (run_summary.c):
 * made and exported as MIMPROF_STATUS_DIR ("" when it cannot be made);
 * printed and removed once the command ended. */
void mpt_run_status_dir_make(char *dir, size_t cap);
void mpt_run_status_dir_print(const char *dir);
/* One line on how many programs the command executed ran unprofiled (the
 * runtime's notes in the status directory, which this removes), unless
 * quiet or none did (run_unprofiled.c). Before mpt_run_status_dir_print. */
void mpt_run_unprofiled_say(const char *dir, bool quiet);
/* Counts the reports in dir newer than `since` and names the newest one
 * of `pid` (or of any process when none of pid's exists), unless quiet. */
void mpt_run_summarize(const char *dir, time_t since, pid_t pid, bool quiet);

#endif
