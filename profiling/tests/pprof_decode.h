/* SPDX-License-Identifier: MIT */
/* A test-only decoder of the pprof wire format (Google's profile.proto),
 * written from the protobuf encoding rules and independent of the
 * encoder under test (which uses protobuf-c). Decodes the fields the tests
 * check; unknown fields are skipped. */
#ifndef MIMPROF_TEST_PPROF_DECODE_H
#define MIMPROF_TEST_PPROF_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
} tp_location;

typedef struct tp_mapping {
    uint64_t id, start, limit, offset;
    int64_t filename, build_id;
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
    tp_mapping *mappings;
    size_t nmappings;
    char **strings;
    size_t nstrings;
    tp_value_type period_type;
    int64_t period, time_nanos, duration_nanos;
    uint64_t *comments; /* string indices */
    size_t ncomments;
} tp_profile;

/* Decodes `len` bytes; false (and *out emptied) on malformed input. */
bool tp_decode(const uint8_t *buf, size_t len, tp_profile *out);
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
/* Address of the innermost frame of s (0 if it has no location). */
uint64_t tp_leaf_address(const tp_profile *p, const tp_sample *s);

#endif
