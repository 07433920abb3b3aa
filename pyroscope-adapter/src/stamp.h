/* SPDX-License-Identifier: MIT */
/* The time (`time_nanos`, milliseconds on the server) of every uploaded
 * profile. Not installed.
 *
 * Pyroscope keeps ONE profile per series, profile type and millisecond:
 * two profiles with the same labels and the same millisecond are replicas
 * to it (v1 deduplicates at query time, v2 at compaction). So the parts of
 * a split report, and the reports of several processes of one series
 * (forked workers), must never share a millisecond. And a profile is one
 * point in time: its live values describe an instant, its interval values
 * a window. The rule (README, "Real servers"):
 *
 *  - a spread M = min(1000, interval / 2) ms and a slot per process and
 *    part: residue o = ((pid mod P) * K + part) mod M, K = min(16, M) parts
 *    per process, P = M / K processes; a stamp is always a millisecond t
 *    with t mod M == o, so processes whose pids differ by less than P, and
 *    the first K parts of each report, never meet;
 *  - a report of [from, until) is stamped at its residue's last
 *    millisecond before `until` (within M ms of the instant its inuse
 *    values describe, inside the window its alloc values cover); a peak at
 *    the last one at or before the peak's time (in the window);
 *  - a window with no such millisecond (shorter than M: an agent's first
 *    window, or the one a stop closes) at its residue's millisecond just
 *    before it, or just after it when the agent used that one already (or
 *    has no stamper);
 *  - with a stamper (an agent's), each residue's stamps strictly increase:
 *    a profile of a window already stamped (a sink submitting one window
 *    twice) moves M ms later instead of replacing the first. Without one
 *    (mp_pyro_upload) the same window and part get the same time again, so
 *    a caller's retry of a whole upload replaces instead of doubling. */
#ifndef MP_PYRO_STAMP_H
#define MP_PYRO_STAMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MP_PYRO_STAMP_SPREAD_MS 1000 /* most a stamp lies before the instant it describes */
#define MP_PYRO_STAMP_PARTS     16   /* parts of one report with slots of their own */

/* The last stamp (ms) given to each residue; zeroed = none yet. */
typedef struct mp_pyro_stamper {
    int64_t last_ms[MP_PYRO_STAMP_SPREAD_MS];
} mp_pyro_stamper;

/* What one upload is stamped with: the window, the instant its live values
 * describe (`at_ns`, 0 = `until_ns`), the agent's interval. */
typedef struct mp_pyro_stamp_req {
    int64_t from_ns, until_ns, at_ns;
    uint32_t interval_ms;
    pid_t pid;
} mp_pyro_stamp_req;

/* The time (ms) of part `part` of the profile described by `r`; `st` (may
 * be NULL) keeps each residue's stamps increasing. */
int64_t mp_pyro_stamp_ms(mp_pyro_stamper *st, const mp_pyro_stamp_req *r, size_t part);

#endif
