/* SPDX-License-Identifier: MIT */
/* The session's cumulative profile, for the HTTP endpoint (http.h):
 * Go's /debug/pprof/heap semantics over the session's reports. Not
 * installed.
 *
 * The profiler's reports are windows: alloc_* since the previous report,
 * inuse_* now. Pull scrapers (Go's pprof, Grafana Alloy, Parca) expect
 * Go's heap profile instead: alloc_* cumulative since the start, inuse_*
 * now, no __delta__ label (they compute deltas themselves). So every
 * report taken while the endpoint is on is merged here
 * (mp_prof_control_feed):
 * strings, mappings, functions and locations are interned, samples keyed
 * by their locations and labels (without __delta__), alloc_* values
 * added, inuse_* values replaced by the newest report's. Memory: the
 * distinct stacks and names of the session, on mmap()ed arenas (never
 * the sampled malloc). Callers serialise (control.h: the host's report lock, or
 * session.c's). */
#ifndef MIMPROF_PROFILING_CONTROL_CUMUL_H
#define MIMPROF_PROFILING_CONTROL_CUMUL_H

#include <stddef.h>
#include <stdint.h>

/* Forgets everything: a new session (`start_ns`: its wall-clock start). */
void mpc_cumul_reset(int64_t start_ns);

/* Merges one report (uncompressed pprof). 0, or -1 (undecodable, other
 * sample types, or no memory: the report is not counted). */
int mpc_cumul_add(const uint8_t *pprof, size_t len);

/* The values at one instant, for a delta profile (Go's ?seconds=N). */
typedef struct {
    int64_t *vals; /* rows * ntypes, mpc_map()ed */
    size_t rows, ntypes, bytes;
    int64_t ns;     /* when */
    unsigned epoch; /* the session's (a mark of an earlier one is refused) */
} mpc_cumul_mark;

/* Copies the values now. 0, or -1 (nothing merged yet, or no memory). */
int mpc_cumul_mark_take(mpc_cumul_mark *m, int64_t now_ns);
void mpc_cumul_mark_free(mpc_cumul_mark *m);

/* The cumulative profile as uncompressed pprof, in memory of *len bytes
 * from mpc_map() (release with mpc_unmap(*out, *len)), its default
 * sample type `dflt` (e.g. "inuse_space"); with `since`, every value
 * minus its value at that mark (Go's delta profile: inuse_* too), and
 * the duration since the mark. 0, or -1 (nothing merged yet, a mark of
 * an earlier session, or no memory). */
int mpc_cumul_encode(const char *dflt, int64_t now_ns, const mpc_cumul_mark *since, uint8_t **out,
                     size_t *len);

#endif
