/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the fitter (src/fit.c) on any bytes. Oracle: for an
 * accepted profile, every part is within the bounds, holds no __delta__
 * sample label, and the parts' values sum, type by type, to the input's
 * (modulo 2^64, as the merge adds), and carries the time its stamp
 * (src/stamp.c, fed the profile's peak comment if any) gave it, distinct
 * for the first 16 parts. Bounds small enough to split. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "profile.pb-c.h"
#include "stamp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SAMPLES 7
#define MAX_BYTES   2048
#define NSUM        8

#define MAX_PARTS 4096

typedef struct stamps {
    mp_pyro_stamper st;
    int64_t given[MAX_PARTS];
} stamps;

static int64_t stamp(void *ctx, size_t part, int64_t peak_ns)
{
    stamps *s = ctx;
    const mp_pyro_stamp_req r = {.from_ns = 1700000000000000000,
                                 .until_ns = 1700000010000000000,
                                 .at_ns = peak_ns,
                                 .interval_ms = 10000,
                                 .pid = 4242};
    int64_t t = mp_pyro_stamp_ms(&s->st, &r, part) * 1000000;
    if (part < MAX_PARTS)
        s->given[part] = t;
    return t;
}

/* Sums of the first NSUM value columns; the samples' count in *n. */
static int sums(const uint8_t *p, size_t len, uint64_t out[NSUM], size_t *n, int *delta,
                int64_t *time_nanos)
{
    Perftools__Profiles__Profile *q = perftools__profiles__profile__unpack(NULL, len, p);
    if (!q)
        return -1;
    *time_nanos = q->time_nanos;
    for (size_t i = 0; i < q->n_sample; i++) {
        const Perftools__Profiles__Sample *s = q->sample[i];
        for (size_t v = 0; v < s->n_value && v < NSUM; v++)
            out[v] += (uint64_t)s->value[v];
        for (size_t l = 0; l < s->n_label; l++)
            if (s->label[l]->key >= 0 && (size_t)s->label[l]->key < q->n_string_table &&
                strcmp(q->string_table[s->label[l]->key], "__delta__") == 0)
                (*delta)++;
    }
    *n += q->n_sample;
    perftools__profiles__profile__free_unpacked(q, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mp_pyro_parts parts;
    char err[256];
    static stamps st;
    memset(&st, 0, sizeof st);
    const mp_pyro_fit_stamp fs = {stamp, &st};
    if (mp_pyro_fit(data, size, MAX_SAMPLES, MAX_BYTES, &fs, &parts, err, sizeof err) != MP_PYRO_OK)
        return 0;
    uint64_t want[NSUM] = {0}, got[NSUM] = {0};
    size_t nin = 0, nout = 0;
    int din = 0, dout = 0;
    int64_t t;
    if (sums(data, size, want, &nin, &din, &t) != 0)
        abort(); /* the fitter read it: so must protobuf-c */
    for (size_t k = 0; k < parts.n; k++) {
        size_t before = nout;
        if (parts.v[k].len > MAX_BYTES ||
            sums(parts.v[k].pprof, parts.v[k].len, got, &nout, &dout, &t) != 0)
            abort();
        if (nout - before > MAX_SAMPLES || nout - before != parts.v[k].samples)
            abort();
        if (k < MAX_PARTS && t != st.given[k])
            abort();
        for (size_t j = 0; j < k && k < MP_PYRO_STAMP_PARTS; j++)
            if (st.given[j] == t)
                abort();
    }
    /* merging only ever adds samples with equal value counts: column sums hold */
    if (memcmp(want, got, sizeof want) != 0 || nout > nin || dout != 0)
        abort();
    mp_pyro_parts_free(&parts);
    return 0;
}
