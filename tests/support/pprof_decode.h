/* SPDX-License-Identifier: MIT */
/* The tests' one decoder of the protobuf wire format and of pprof (Google's
 * profile.proto), written from the encoding rules and independent of every
 * encoder under test (protobuf-c, the adapter's own): a field reader that
 * any test can walk a message with, and a pprof model of the fields the
 * tests check. Unknown fields are skipped. */
#ifndef MIMPROF_TEST_PPROF_DECODE_H
#define MIMPROF_TEST_PPROF_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --- protobuf wire ---------------------------------------------------------- */

/* A reader over the bytes [p, end); `bad` once they were malformed. */
typedef struct pbr {
    const uint8_t *p, *end;
    bool bad;
} pbr;
/* One field: number, wire type (0 varint, 1 fixed64, 2 length-delimited,
 * 5 fixed32) and value. */
typedef struct pbf {
    uint32_t field, wt;
    uint64_t v;          /* varint / fixed64 bits */
    const uint8_t *data; /* length-delimited */
    size_t len;
} pbf;
/* The next field of r into *f; false at the end or on malformed bytes
 * (then r->bad). */
bool pb_next(pbr *r, pbf *f);
/* A reader over the bytes of a length-delimited field (empty otherwise). */
static inline pbr pb_sub(const pbf *f)
{
    pbr r = {f->data, f->data ? f->data + f->len : NULL, false};
    return r;
}

/* --- pprof, read back --------------------------------------------------------- */

typedef struct tp_label {
    int64_t key, str, num, num_unit;
} tp_label;

typedef struct tp_sample {
    uint64_t *location_ids;
    size_t nlocations;
    int64_t *values;
    size_t nvalues;
    tp_label *labels;
    size_t nlabels;
} tp_sample;

typedef struct tp_location {
    uint64_t id, mapping_id, address;
    size_t nlines;
    uint64_t function; /* the function id of the first line, 0 if none */
} tp_location;

typedef struct tp_function {
    uint64_t id;
    int64_t name, system_name, filename;
} tp_function;

typedef struct tp_mapping {
    uint64_t id, start, limit, offset;
    int64_t filename, build_id;
    bool has_functions;
} tp_mapping;

typedef struct tp_value_type {
    int64_t type, unit;
} tp_value_type;

typedef struct tp_profile {
    tp_value_type *sample_types;
    size_t nsample_types;
    tp_sample *samples;
    size_t nsamples;
    tp_location *locations;
    size_t nlocations;
    tp_function *functions;
    size_t nfunctions;
    tp_mapping *mappings;
    size_t nmappings;
    char **strings;
    size_t nstrings;
    tp_value_type period_type;
    int64_t period, time_nanos, duration_nanos;
    uint64_t *comments; /* string indices */
    size_t ncomments;
} tp_profile;

/* Decodes `len` bytes; false (and *out emptied) on malformed input or a
 * string table that does not start with "". */
bool tp_decode(const uint8_t *buf, size_t len, tp_profile *out);
/* A server's answer to a protobuf SelectMergeProfile: as tp_decode, except
 * that an empty body is an empty profile (a string table of ""), which is
 * how Pyroscope v2 answers a range that holds nothing (HTTP 200, 0 bytes). */
bool tp_decode_answer(const uint8_t *buf, size_t len, tp_profile *out);
void tp_free(tp_profile *p);

/* The string at index i ("" when out of range). */
const char *tp_str(const tp_profile *p, int64_t i);
/* Index of the sample type named `type`, -1 if absent. */
int tp_type_index(const tp_profile *p, const char *type);
/* The location with this id, NULL if none. */
const tp_location *tp_location_by_id(const tp_profile *p, uint64_t id);
/* The value of the string label `key` of sample s, NULL if it has none. */
const char *tp_label_str(const tp_profile *p, const tp_sample *s, const char *key);
/* The numeric label `key` of sample s: its value and unit; false if none. */
bool tp_label_num(const tp_profile *p, const tp_sample *s, const char *key, int64_t *num,
                  const char **unit);
/* Sum of value `type` over every sample. */
int64_t tp_total(const tp_profile *p, const char *type);
/* Sum of the value at index k over every sample (0 when k < 0). */
int64_t tp_total_at(const tp_profile *p, int k);
/* Sum of the value at index k over the samples whose stack holds a frame
 * named `func` (the function of a location's first line). */
int64_t tp_total_func(const tp_profile *p, int k, const char *func);
/* Address of the innermost frame of s (0 if it has no location). */
uint64_t tp_leaf_address(const tp_profile *p, const tp_sample *s);
/* Name of the innermost frame of sample i ("" when unnamed). */
const char *tp_leaf(const tp_profile *p, size_t i);

#endif
