/* SPDX-License-Identifier: MIT */
/* The report side's process-lifetime cache: the mappings and the
 * symbols resolved so far, kept between reports (report_builder.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "builder_state.h"
#include "report_internal.h"

static void on_drop(mp_obj *o, void *arg) { mp_syms_forget_obj(arg, o); }

mp_report_cache *mp_report_cache_new(void)
{
    mp_report_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->syms = mp_syms_new();
    if (c->syms == NULL) {
        free(c);
        return NULL;
    }
    mp_maps_init(&c->maps);
    c->maps.on_drop = on_drop;
    c->maps.on_drop_arg = c->syms;
    c->budget = MP_REPORT_SYMBOL_BUDGET;
    c->last_quality = -1;
    return c;
}

void mp_report_cache_free(mp_report_cache *c)
{
    if (c == NULL)
        return;
    mp_maps_destroy(&c->maps);
    mp_syms_free(c->syms);
    free(c);
}

size_t mp_report_cache_symbol_bytes(const mp_report_cache *c)
{
    return c == NULL ? 0 : mp_syms_bytes(c->syms);
}

int mp_report_cache_last_quality(const mp_report_cache *c)
{
    return c == NULL ? -1 : c->last_quality;
}

void mp_report_cache_set_budget(mp_report_cache *c, size_t bytes) { c->budget = bytes; }

mp_maps *mp_report_cache_maps(mp_report_cache *c) { return &c->maps; }

bool mp_report_cache_refresh(mp_report_cache *c)
{
    bool ok = mp_maps_refresh(&c->maps);
    if (c->maps.unloads != c->seen_unloads) {
        /* Addresses of an unloaded object may now mean something else. */
        mp_syms_clear_addresses(c->syms);
        c->seen_unloads = c->maps.unloads;
    }
    return ok;
}
