/* SPDX-License-Identifier: MIT */
/* The time of every uploaded profile (src/stamp.c): Pyroscope keeps one
 * profile per series and millisecond, so parts of one report and reports
 * of processes with nearby pids never share one; a report's stamp lies in
 * its window, at most the spread before its end; a peak's at its instant;
 * an agent never gives one residue the same millisecond twice. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "harness.h"
#include "stamp.h"

#define MS    1000000LL
#define T0    (1700000000000LL * MS) /* a multiple of 10 s */
#define EVERY 10000                  /* ms */

static mp_pyro_stamp_req window(int64_t from_ms, int64_t until_ms, pid_t pid)
{
    return (mp_pyro_stamp_req){.from_ns = T0 + from_ms * MS,
                               .until_ns = T0 + until_ms * MS,
                               .interval_ms = EVERY,
                               .pid = pid};
}

/* 62 processes with consecutive pids (a preforking server's workers),
 * each report split in 16 parts, one aligned window: 992 distinct
 * milliseconds, all in the window's last second. */
Test(stamp, nearby_processes_and_parts_never_share_a_millisecond)
{
    const int procs = MP_PYRO_STAMP_SPREAD_MS / MP_PYRO_STAMP_PARTS;
    char *seen = calloc(MP_PYRO_STAMP_SPREAD_MS, 1);
    for (int p = 0; p < procs; p++) {
        for (size_t k = 0; k < MP_PYRO_STAMP_PARTS; k++) {
            mp_pyro_stamp_req r = window(10000, 20000, 4242 + p);
            int64_t t = mp_pyro_stamp_ms(NULL, &r, k) - T0 / MS;
            cr_assert(t >= 20000 - MP_PYRO_STAMP_SPREAD_MS && t < 20000,
                      "pid %d part %zu: %lld ms is not in the window's last second", 4242 + p, k,
                      (long long)t);
            cr_assert(!seen[t - 19000], "pid %d part %zu: %lld ms given twice", 4242 + p, k,
                      (long long)t);
            seen[t - 19000] = 1;
        }
    }
    free(seen);
}

/* Full windows are stamped in their last second; a short first window
 * in it or at most the spread before it, a short window at a stop in the
 * second after it; nearby processes keep their own milliseconds in both. */
Test(stamp, inside_the_window_or_next_to_a_short_one)
{
    for (pid_t pid = 1; pid < 3000; pid += 7) {
        mp_pyro_stamper *st = calloc(1, sizeof *st), *other = calloc(1, sizeof *other);
        int64_t from = 9000 + pid % 997;
        mp_pyro_stamp_req first = window(from, 10000, pid), full = window(10000, 20000, pid);
        mp_pyro_stamp_req stop = window(20000, 20000 + pid % 499 + 1, pid);
        int64_t a = mp_pyro_stamp_ms(st, &first, 0) - T0 / MS;
        int64_t b = mp_pyro_stamp_ms(st, &full, 0) - T0 / MS;
        int64_t c = mp_pyro_stamp_ms(st, &stop, 0) - T0 / MS;
        cr_assert(a >= from - MP_PYRO_STAMP_SPREAD_MS && a < 10000, "pid %d: first %lld", pid,
                  (long long)a);
        cr_assert(b >= 20000 - MP_PYRO_STAMP_SPREAD_MS && b < 20000, "pid %d: full %lld", pid,
                  (long long)b);
        cr_assert(c >= 20000 && c < 20000 + MP_PYRO_STAMP_SPREAD_MS + 500, "pid %d: stop %lld", pid,
                  (long long)c);
        /* the next pid, stopping 1 ms later, the same three windows */
        mp_pyro_stamp_req f2 = first, full2 = full, s2 = stop;
        f2.pid = full2.pid = s2.pid = pid + 1;
        s2.until_ns += MS;
        int64_t a2 = mp_pyro_stamp_ms(other, &f2, 0) - T0 / MS;
        int64_t b2 = mp_pyro_stamp_ms(other, &full2, 0) - T0 / MS;
        int64_t c2 = mp_pyro_stamp_ms(other, &s2, 0) - T0 / MS;
        cr_assert(a2 != a && b2 != b && c2 != c && c2 != b && c != b2, "pid %d and %d met", pid,
                  pid + 1);
        free(st);
        free(other);
    }
}

/* A peak at the instant it was reached (at most the spread before). */
Test(stamp, peak_at_its_instant)
{
    mp_pyro_stamp_req r = window(10000, 20000, 77);
    r.at_ns = T0 + 13456 * MS + 789;
    int64_t t = mp_pyro_stamp_ms(NULL, &r, 0) - T0 / MS;
    cr_expect(t <= 13456 && t > 13456 - MP_PYRO_STAMP_SPREAD_MS, "%lld", (long long)t);
    r.at_ns = T0 + 10001 * MS; /* early in the window: not before it */
    t = mp_pyro_stamp_ms(NULL, &r, 0) - T0 / MS;
    cr_expect(t >= 10000 && t < 10000 + MP_PYRO_STAMP_SPREAD_MS, "%lld", (long long)t);
}

/* An agent's stamper: one window submitted three times gets three
 * milliseconds; without one, the same times again (a retried upload
 * replaces itself). */
Test(stamp, an_agent_never_repeats_itself)
{
    mp_pyro_stamper *st = calloc(1, sizeof *st);
    mp_pyro_stamp_req r = window(10000, 11000, 99);
    int64_t a = mp_pyro_stamp_ms(st, &r, 0), b = mp_pyro_stamp_ms(st, &r, 0),
            c = mp_pyro_stamp_ms(st, &r, 0);
    cr_expect(a < b && b < c, "%lld %lld %lld", (long long)a, (long long)b, (long long)c);
    cr_expect_eq(mp_pyro_stamp_ms(NULL, &r, 0), a);
    cr_expect_eq(mp_pyro_stamp_ms(NULL, &r, 0), a);
    /* the next window is not pushed by those */
    mp_pyro_stamp_req next = window(20000, 30000, 99);
    int64_t d = mp_pyro_stamp_ms(st, &next, 0);
    cr_expect_eq(d, mp_pyro_stamp_ms(NULL, &next, 0));
    free(st);
}

/* Short intervals shrink the spread to half the interval: stamps stay in
 * their window; 200 ms (the integration tests') keeps 6 process slots. */
Test(stamp, short_interval)
{
    for (int k = 0; k < 16; k++) {
        mp_pyro_stamp_req r = window(400, 600, 1234);
        r.interval_ms = 200;
        int64_t t = mp_pyro_stamp_ms(NULL, &r, (size_t)k) - T0 / MS;
        cr_expect(t >= 500 && t < 600, "part %d: %lld", k, (long long)t);
    }
    mp_pyro_stamp_req tiny = window(400, 410, 1234);
    tiny.interval_ms = 10;
    int64_t t = mp_pyro_stamp_ms(NULL, &tiny, 3) - T0 / MS;
    cr_expect(t >= 400 && t < 410);
}

static int64_t stamp_cb(void *ctx, size_t part, int64_t peak_ns)
{
    int64_t *seen_peak = ctx;
    *seen_peak = peak_ns;
    return T0 + (int64_t)part * MS;
}

/* The fitter gives each part the time it is told, and finds a peak's
 * instant in the profiler's "peak: time_nanos=" comment. */
Test(stamp, fit_stamps_each_part, .timeout = 120)
{
    size_t len;
    uint8_t *in = tp_build_wide(15, 4096, 1700000000000000000, &len);
    int64_t peak = -1;
    mp_pyro_fit_stamp fs = {stamp_cb, &peak};
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(in, len, 16000, 0, &fs, &parts, err, sizeof err), MP_PYRO_OK, "%s",
                 err);
    cr_assert_geq(parts.n, 3);
    for (size_t k = 0; k < parts.n; k++) {
        tp_profile p;
        cr_assert(tp_decode(parts.v[k].pprof, parts.v[k].len, &p));
        cr_expect_eq(p.time_nanos, T0 + (int64_t)k * MS);
        tp_free(&p);
    }
    cr_expect_eq(peak, 0, "no peak comment");
    mp_pyro_parts_free(&parts);
    free(in);
}

Test(stamp, fit_reads_a_peaks_instant)
{
    tp_heap_values v;
    fixed_values(0, &v);
    size_t len;
    uint8_t *in = tp_build_heap(&v, T0, 10000 * MS, false, &len);
    /* one more string (index 14, after the builder's 14) as a comment */
    tbuf b = {0};
    tbuf_put(&b, in, len);
    pbw_str(&b, 6, "peak: time_nanos=1700000003456000789 bytes=1 samples=1 window ..");
    pbw_varint(&b, 13, 14);
    int64_t peak = -1;
    mp_pyro_fit_stamp fs = {stamp_cb, &peak};
    mp_pyro_parts parts;
    char err[256] = "";
    cr_assert_eq(mp_pyro_fit(b.p, b.len, 16000, 0, &fs, &parts, err, sizeof err), MP_PYRO_OK, "%s",
                 err);
    cr_expect_eq(peak, 1700000003456000789LL);
    mp_pyro_parts_free(&parts);
    tbuf_free(&b);
    free(in);
}
