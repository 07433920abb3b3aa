/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the jemalloc heap_v2 parser, the unbiasing rule and
 * the pprof encoding of whatever parses (decoded back by protobuf-c). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "jeprof_parse.h"
#include "jeprof_pprof.h"
#include "profile.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mp_jeprof_dump d;
    char err[200];
    if (mp_jeprof_parse((const char *)data, size, &d, err, sizeof err) != 0) {
        if (!err[0] || d.stacks || d.frames)
            abort();
        return 0;
    }
    if (d.period == 0)
        abort();
    for (size_t i = 0; i < d.nstacks; i++) {
        const mp_jeprof_stack *s = &d.stacks[i];
        if (s->frame_off > d.nframes || s->depth > d.nframes - s->frame_off ||
            s->depth > MP_JEPROF_MAX_DEPTH)
            abort();
        double o, b;
        mp_jeprof_unbias(s->objs, s->bytes, d.period, &o, &b);
        if (!(o >= 0) || !(b >= 0) || isnan(o) || isnan(b))
            abort();
        if (s->objs && s->bytes &&
            (o < (double)s->objs * 0.999999 || b < (double)s->bytes * 0.999999))
            abort(); /* unbiasing never shrinks */
    }
    /* One mapping of a made-up address space (nothing is read from it). */
    static mp_prof_symbolizer *s;
    mp_prof_mapping map = {.start = 0x1000,
                           .limit = 0x7fffffffffff,
                           .file_offset = 0,
                           .path = "fuzz",
                           .build_id = "00"};
    if (!s && (mp_prof_symbolizer_new(&s) != MP_PROF_OK ||
               mp_prof_symbolizer_add_mapping(s, &map) != MP_PROF_OK))
        abort();
    mp_jeprof_pprof_options opt = {.allocator_code = (size % 2) ? 0x2000 : 0,
                                   .symbolize = MP_PROF_SYMBOLIZE_NONE,
                                   .time_nanos = 1,
                                   .duration_nanos = 1};
    uint8_t *out;
    size_t len;
    if (mp_jeprof_pprof(&d, s, &opt, &out, &len) == MP_PROF_OK) {
        Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, out);
        if (!p || p->n_sample_type != 2)
            abort();
        for (size_t i = 0; i < p->n_sample; i++)
            for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
                if (p->sample[i]->location_id[k] == 0 ||
                    p->sample[i]->location_id[k] > p->n_location)
                    abort();
        perftools__profiles__profile__free_unpacked(p, NULL);
        mp_prof_buffer_free(out);
    }
    mp_jeprof_dump_free(&d);
    return 0;
}
