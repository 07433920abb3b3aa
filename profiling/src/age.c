/* SPDX-License-Identifier: MIT */
/* Age buckets. A live sample knows when it was allocated (the monotonic
 * clock, read once per sample on the sampling path); a report sums a
 * stack's live samples per bucket of age and labels each in-use sample
 * with the bucket's lower bound, as the numeric label `age`, unit
 * "seconds" (go tool pprof converts: -tagfocus=age=10m:).
 *
 * The buckets (lower bounds): 0, 1s, 3s, 10s, 30s, 1m, 3m, 10m, 30m, 1h,
 * 3h, 6h, 12h, 1d, 3d, 7d. A bucket holds the ages from its bound up to
 * the next one (the last: everything older). Why these:
 * - bounded: a stack gives at most 16 in-use samples, whatever the run;
 * - the durations people type (10s, 1m, 10m, 1h, 1d) are bounds, so
 *   "older than 10m" (-tagfocus=age=10m:, --older-than 10m) keeps exactly
 *   the objects 10 minutes old or more; between two bounds a filter is
 *   exact to the bucket below it;
 * - label values are the bounds, not each report's exact ages: a label
 *   value set that does not change from report to report.
 * A report's "now" and a sample's time come from the same monotonic clock
 * (system-wide, so a fork child's inherited samples keep their ages); a
 * heap image stores each sample's age at the snapshot instead, which means
 * the same thing in any process that reads it. */
#include "age.h"

#define S 1000000000ull

static const uint64_t BOUND_NS[MP_AGE_BUCKETS] = {
    0,
    1 * S,
    3 * S,
    10 * S,
    30 * S,
    60 * S,
    180 * S,
    600 * S,
    1800 * S,
    3600 * S,
    3 * 3600 * S,
    6 * 3600 * S,
    12 * 3600 * S,
    86400 * S,
    3 * 86400 * S,
    7 * 86400 * S,
};

unsigned mp_age_bucket(uint64_t age_ns)
{
    unsigned b = MP_AGE_BUCKETS - 1;
    while (b > 0 && age_ns < BOUND_NS[b])
        b--;
    return b;
}

int64_t mp_age_bucket_seconds(unsigned b)
{
    return b < MP_AGE_BUCKETS ? (int64_t)(BOUND_NS[b] / S) : -1;
}
