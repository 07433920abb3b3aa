/* SPDX-License-Identifier: MIT */
/* The heap-image schema's registry (heap_image_schema.h). */
#include "heap_image_schema.h"

#include <stddef.h>
#include <stdint.h>

static const struct {
    const char *name;
    const char *spelling;
    mp_img_foreign_policy foreign;
} SCHEMA_TYPES[MP_HIMG_T_COUNT] = {
    [MP_HIMG_T_STR] = {"mimprof.str", "word bytes", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_WORDS] = {"mimprof.words", "*: word", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_REFS] = {"mimprof.refs", "*: word ref", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_MAPPING] = {"mimprof.mapping", "ref ref ref word word", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_STACK] = {"mimprof.stack", "*: word word ref foreign", MP_IMG_FOREIGN_CODE},
    [MP_HIMG_T_LIVE] = {"mimprof.live", "ref ref", MP_IMG_FOREIGN_NONE},
    [MP_HIMG_T_INTERVAL] = {"mimprof.interval", "ref word word word", MP_IMG_FOREIGN_NONE},
};

mp_img_status mp_himg_registry_new(mp_img_registry **out, mp_himg_types *types, mp_img_error *err)
{
    mp_img_registry *reg = NULL;
    mp_img_status st = mp_img_registry_new(0, &reg, err);
    for (int i = 0; st == MP_IMG_OK && i < MP_HIMG_T_COUNT; i++) {
        mp_img_type_options o = {
            .spelling = SCHEMA_TYPES[i].spelling,
            .foreign = SCHEMA_TYPES[i].foreign,
            .bytes_length = i == MP_HIMG_T_STR ? mp_img_bytes_prev_word : NULL,
        };
        st = mp_img_type_register(reg, SCHEMA_TYPES[i].name, &o, &types->t[i], err);
    }
    if (st != MP_IMG_OK) {
        mp_img_registry_free(reg);
        return st;
    }
    *out = reg;
    return MP_IMG_OK;
}

/* The counters stored as they are (uint64_t fields), by word. */
static const struct {
    int word;
    size_t offset;
} COUNTERS[] = {
    {MP_HIMG_CTR_TAKEN, offsetof(mp_prof_stats, samples_taken)},
    {MP_HIMG_CTR_REPORTED, offsetof(mp_prof_stats, samples_reported)},
    {MP_HIMG_CTR_DROPPED_REGISTRATION, offsetof(mp_prof_stats, dropped_registration)},
    {MP_HIMG_CTR_DROPPED_TEARDOWN, offsetof(mp_prof_stats, dropped_teardown)},
    {MP_HIMG_CTR_DROPPED_OVERFLOW_FULL, offsetof(mp_prof_stats, dropped_overflow_full)},
    {MP_HIMG_CTR_DROPPED_LIVE_TABLE_FULL, offsetof(mp_prof_stats, dropped_live_table_full)},
    {MP_HIMG_CTR_RING_RECORDS, offsetof(mp_prof_stats, ring_records)},
    {MP_HIMG_CTR_OVERFLOW_RECORDS, offsetof(mp_prof_stats, overflow_records)},
    {MP_HIMG_CTR_LIVE_SAMPLES, offsetof(mp_prof_stats, live_samples)},
    {MP_HIMG_CTR_REGISTERED_THREADS, offsetof(mp_prof_stats, registered_threads)},
    {MP_HIMG_CTR_LAST_REPORT_NANOS, offsetof(mp_prof_stats, last_report_nanos)},
    {MP_HIMG_CTR_SYMBOL_BYTES, offsetof(mp_prof_stats, symbol_bytes)},
    {MP_HIMG_CTR_RECORDS_DISCARDED, offsetof(mp_prof_stats, records_discarded)},
    {MP_HIMG_CTR_STACKS, offsetof(mp_prof_stats, stacks)},
};

/* Every word but the three converted by hand below is in COUNTERS. */
_Static_assert(sizeof COUNTERS / sizeof COUNTERS[0] == MP_HIMG_CTR_COUNT - 3,
               "a counter word without its field");

void mp_himg_counters_put(mp_img_word *k, const mp_prof_stats *s)
{
    for (size_t i = 0; i < sizeof COUNTERS / sizeof COUNTERS[0]; i++)
        k[COUNTERS[i].word] = *(const uint64_t *)((const char *)s + COUNTERS[i].offset);
    k[MP_HIMG_CTR_LAST_SYMBOL_QUALITY] = (mp_img_word)(intptr_t)s->last_symbol_quality;
    k[MP_HIMG_CTR_ACTIVE] = s->active;
    k[MP_HIMG_CTR_ALLOCATOR_OBSERVED] = s->allocator_observed;
}

void mp_himg_counters_get(mp_prof_stats *s, const mp_img_word *k)
{
    for (size_t i = 0; i < sizeof COUNTERS / sizeof COUNTERS[0]; i++)
        *(uint64_t *)((char *)s + COUNTERS[i].offset) = k[COUNTERS[i].word];
    s->last_symbol_quality = (int)(intptr_t)k[MP_HIMG_CTR_LAST_SYMBOL_QUALITY];
    s->active = k[MP_HIMG_CTR_ACTIVE] != 0;
    s->allocator_observed = k[MP_HIMG_CTR_ALLOCATOR_OBSERVED] != 0;
}
