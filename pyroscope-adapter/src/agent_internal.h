/* SPDX-License-Identifier: MIT */
/* The agent's state, shared by agent.c (life cycle, public functions),
 * reporter.c (the reporter thread) and uploader.c (the uploader thread,
 * retries, spool). Not installed.
 *
 * The agent: a reporter thread asks the backend for a profile at every
 * wall-clock multiple of the interval, and an uploader thread delivers the
 * queue oldest first with retries, then the spool.
 *
 * Invariants (under a->mu):
 *  - every profile put in the queue is counted once in reports_queued and
 *    ends in exactly one of uploaded / dropped_* / spooled, or is still in
 *    the queue or in flight (see mp_pyro_stats);
 *  - windows are contiguous: each report's `from` is the previous `until`
 *    (the first `from` is the agent's start), so nothing is reported twice
 *    or skipped even when boundaries are missed;
 *  - the queue is strictly FIFO: a profile waiting for its retry blocks the
 *    younger ones (the server is failing for them too). */
#ifndef MP_PYRO_AGENT_INTERNAL_H
#define MP_PYRO_AGENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "backend_internal.h"
#include "config_internal.h"
#include "http.h"
#include "queue.h"
#include "stamp.h"

typedef enum dispose_reason {
    DISPOSE_OVERFLOW,  /* queue full */
    DISPOSE_EXHAUSTED, /* retry budget spent */
    DISPOSE_KEEP,      /* not retryable, profile fine */
    DISPOSE_DEADLINE   /* stop deadline */
} dispose_reason;

struct mp_pyro_agent {
    mp_pyro_config *cfg;
    mp_pyro_backend *backend;
    char spy[64];
    mp_pyro_http *http;
    mp_pyro_spool *spool;
    mp_pyro_rng rng;                     /* uploader thread only */
    char last_rejection[MP_PYRO_ERRLEN]; /* uploader thread only: logged once per kind */

    pthread_mutex_t mu;
    pthread_cond_t rep_cv; /* CLOCK_REALTIME: report boundaries */
    pthread_cond_t up_cv;  /* CLOCK_MONOTONIC: retries, deadline */
    pthread_t reporter, uploader;
    pthread_mutex_t stop_mu;

    /* under mu */
    mp_pyro_queue q;
    bool inflight;
    bool stopping;
    bool reporter_done;
    bool uploader_done;
    bool stopped;
    int64_t last_boundary_ns; /* reporter: `from` of the next window */
    /* each residue's last stamp (stamp.h): [0] reports, [1] profiles of
     * renamed types (peaks); no profile of this agent replaces another */
    mp_pyro_stamper stamps[2];
    int64_t flush_deadline_ns; /* monotonic, set by stop */
    int64_t spool_retry_at_ns; /* monotonic: spool resend backoff */
    uint32_t spool_attempts;
    uint64_t disposed_at_stop;
    mp_pyro_stats st;
    mp_pyro_status last_status;
    char last_error[MP_PYRO_ERRLEN];
    mp_pyro_status stop_status;

    _Atomic int64_t abort_at; /* deadline for a request in flight */
};

static inline struct timespec mp_pyro_ts_of(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

/* Records the last error (under a->mu). */
void mp_pyro_agent_set_error(mp_pyro_agent *a, mp_pyro_status s, const char *msg);
/* Spools or drops `it` (without a->mu) and counts the outcome. */
void mp_pyro_agent_dispose(mp_pyro_agent *a, mp_pyro_item *it, dispose_reason why);
/* Puts a gzipped profile in the queue (without a->mu). */
void mp_pyro_agent_enqueue(mp_pyro_agent *a, mp_pyro_item it);
/* Fits a report to the server's limits, stamps and queues its parts
 * (without a->mu); `renamed`: its types were renamed (a peak), stamped
 * apart from the reports. A report that cannot be read or fitted is
 * counted in reports_failed, logged and its status returned. */
mp_pyro_status mp_pyro_agent_queue_report(mp_pyro_agent *a, const uint8_t *pprof, size_t len,
                                          int64_t from_ns, int64_t until_ns, bool renamed);

void *mp_pyro_reporter_main(void *arg);
void *mp_pyro_uploader_main(void *arg);

#endif
