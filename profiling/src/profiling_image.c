/* SPDX-License-Identifier: MIT */
/* The public reader of heap images (<mimprof/profiling_image.h>): an
 * opaque handle over the checked image of heap_image_read.c, its totals,
 * its mappings and their symbol files, and its pprof (heap_image_pprof.c).
 * Never touches the process recorder: reading an image is not profiling. */
#include <stdlib.h>
#include <string.h>

#include <mimprof/profiling_image.h>

#include "heap_image.h"

struct mp_prof_image {
    mp_himg *h;
};

static mp_prof_status wrap(int rc, mp_himg *h, mp_prof_image **out)
{
    if (rc != 0)
        return MP_PROF_E_BAD_IMAGE;
    mp_prof_image *img = malloc(sizeof *img);
    if (img == NULL) {
        mp_himg_free(h);
        return MP_PROF_E_NOMEM;
    }
    img->h = h;
    *out = img;
    return MP_PROF_OK;
}

mp_prof_status mp_prof_image_open(const char *path, mp_prof_image **out, char *why, size_t whylen)
{
    if (path == NULL || out == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_himg *h = NULL;
    int rc = mp_himg_load(path, &h, why, whylen);
    return wrap(rc, h, out);
}

mp_prof_status mp_prof_image_open_memory(const void *data, size_t len, mp_prof_image **out,
                                         char *why, size_t whylen)
{
    if ((data == NULL && len > 0) || out == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_himg *h = NULL;
    int rc = mp_himg_load_memory(data, len, &h, why, whylen);
    return wrap(rc, h, out);
}

void mp_prof_image_free(mp_prof_image *img)
{
    if (img == NULL)
        return;
    mp_himg_free(img->h);
    free(img);
}

void mp_prof_image_info_get(const mp_prof_image *img, mp_prof_image_info *out)
{
    const mp_himg *h = img->h;
    memset(out, 0, sizeof *out);
    memcpy(out->version, h->version, sizeof out->version);
    out->version[sizeof out->version - 1] = '\0';
    out->pid = h->meta[MP_HIMG_META_PID];
    out->generation = h->meta[MP_HIMG_META_GENERATION];
    out->snapshot_ns = h->meta[MP_HIMG_META_SNAPSHOT_NS];
    out->interval_start_ns = h->meta[MP_HIMG_META_INTERVAL_NS];
    out->config = h->cfg;
    out->counters = h->counters;
    out->live_samples = h->nlive;
    mp_himg_live_totals(h, &out->live_objects, &out->live_bytes);
    out->interval_stacks = h->ninterval;
    for (size_t i = 0; i < h->ninterval; i++) {
        out->interval_objects += h->interval[i].objects;
        out->interval_bytes += h->interval[i].bytes;
        out->interval_records += h->interval[i].records;
    }
    out->stacks = h->nstacks;
    for (size_t i = 0; i < h->nstacks; i++) {
        out->frames += h->stacks[i].depth;
        out->named_frames += h->stacks[i].named;
    }
    out->mappings = h->nmaps;
    out->has_peak = h->has_peak;
    out->peak_bytes = h->peak[MP_HIMG_PEAK_BYTES];
    out->peak_time_ns = (int64_t)h->peak[MP_HIMG_PEAK_TIME_NS];
}

mp_prof_status mp_prof_image_mapping_get(const mp_prof_image *img, size_t i,
                                         mp_prof_image_mapping *out)
{
    if (img == NULL || out == NULL || i >= img->h->nmaps)
        return MP_PROF_E_INVALID_CONFIG;
    const mp_himg_mapping *m = &img->h->maps[i];
    /* The reader refuses a mapping without executable segments. */
    *out = (mp_prof_image_mapping){
        .path = m->path,
        .build_id = m->build_id,
        .main = (m->flags & MP_HIMG_MAP_MAIN) != 0,
        .loaded = (m->flags & MP_HIMG_MAP_LOADED) != 0,
        .start = m->segs[0].start,
        .limit = m->segs[m->nsegs - 1].limit,
        .segments = m->nsegs,
    };
    return MP_PROF_OK;
}

/* Both enums list the same outcomes in the same order. */
_Static_assert((int)MP_PROF_IMAGE_SYMBOLS_FOUND == (int)MP_HIMG_FOUND &&
                   (int)MP_PROF_IMAGE_SYMBOLS_NO_FILE == (int)MP_HIMG_NO_FILE &&
                   (int)MP_PROF_IMAGE_SYMBOLS_NO_BUILD_ID == (int)MP_HIMG_NO_BUILD_ID &&
                   (int)MP_PROF_IMAGE_SYMBOLS_MISSING == (int)MP_HIMG_MISSING &&
                   (int)MP_PROF_IMAGE_SYMBOLS_MISMATCH == (int)MP_HIMG_MISMATCH,
               "mp_prof_image_symbols and mp_himg_where differ");

mp_prof_image_symbols mp_prof_image_locate(const mp_prof_image *img, size_t i,
                                           const char *binary_path, char **file, char *why,
                                           size_t whylen)
{
    *file = NULL;
    if (img == NULL || i >= img->h->nmaps)
        return MP_PROF_IMAGE_SYMBOLS_NO_FILE;
    return (mp_prof_image_symbols)mp_himg_locate(&img->h->maps[i], binary_path, file, why, whylen);
}

mp_prof_status mp_prof_image_pprof(const mp_prof_image *img, const mp_prof_image_pprof_opts *opts,
                                   uint8_t **out, size_t *len)
{
    if (img == NULL || out == NULL || len == NULL)
        return MP_PROF_E_INVALID_CONFIG;
    mp_himg_pprof_opts po = {.symbolize = -1};
    if (opts != NULL) {
        if (opts->symbolize < -1 || opts->symbolize > (int)MP_PROF_SYMBOLIZE_LINES)
            return MP_PROF_E_INVALID_CONFIG;
        po = (mp_himg_pprof_opts){.binary_path = opts->binary_path,
                                  .symbolize = opts->symbolize,
                                  .note = opts->note,
                                  .note_ctx = opts->note_ctx,
                                  .peak = opts->peak != 0};
    }
    return mp_himg_pprof(img->h, &po, out, len);
}
