/* SPDX-License-Identifier: MIT */
/* Stamps that no other part or process of the series shares (stamp.h). */
#include "stamp.h"

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ceil_ms(int64_t ns) { return -floor_div(-ns, 1000000); }

int64_t mp_pyro_stamp_ms(mp_pyro_stamper *st, const mp_pyro_stamp_req *r, size_t part)
{
    int64_t m = r->interval_ms / 2;
    if (m > MP_PYRO_STAMP_SPREAD_MS)
        m = MP_PYRO_STAMP_SPREAD_MS;
    if (m < 1)
        m = 1;
    int64_t k = m < MP_PYRO_STAMP_PARTS ? m : MP_PYRO_STAMP_PARTS;
    int64_t procs = m / k;
    int64_t o = (((int64_t)r->pid % procs) * k + (int64_t)(part % (size_t)m)) % m;
    /* valid milliseconds t: from <= t * 1e6 < until, i.e. [lo, hi] */
    int64_t lo = ceil_ms(r->from_ns), hi = ceil_ms(r->until_ns) - 1;
    if (hi < lo)
        hi = lo;
    int64_t at = r->at_ns ? floor_div(r->at_ns, 1000000) : hi;
    if (at > hi)
        at = hi;
    if (at < lo)
        at = lo;
    int64_t t = at - (((at - o) % m) + m) % m; /* the residue's last ms <= at */
    if (t < lo)
        t += m;
    int64_t *last = st ? &st->last_ms[o] : NULL;
    if (t > hi) {
        /* A window shorter than the spread holds no millisecond of the
         * residue: the one just before it (a first window: nothing of this
         * process there), unless this agent used it (the window before a
         * stop's), then the one just after it (nothing follows a stop; a
         * next window's lies in its last M ms, at least M later). Off the
         * residue two processes could meet. */
        if (last && (*last == 0 || *last < t - m))
            t -= m;
    }
    if (last) {
        if (*last != 0 && t <= *last)
            t = *last + m;
        *last = t;
    }
    return t;
}
