/* SPDX-License-Identifier: MIT */
/* A heap image as pprof, offline (heap_image.h): the report side's own
 * builder, mappings and symbolizer, given the image's mappings instead of
 * this process's, and symbol files found by build-id.
 *
 * The profile is the one mp_profiler_report() would have returned in the
 * writing process at the snapshot: the same stacks (the image maps every
 * frame back to its address there), the same values summed in the same
 * order, the same mappings in the same order (so the same mapping ids),
 * symbolized from files with the mappings' build-ids. A file whose
 * build-id differs is never used: its mapping's locations keep their
 * addresses and the mapping its build-id, for a server to symbolize, and
 * the caller is told which file had which build-id. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "age.h"
#include "heap_image.h"
#include "peak.h"
#include "report/maps.h"
#include "report/report_internal.h"

/* The age bucket of an image's sample; MP_AGE_BUCKETS when its age is
 * unknown (schema 1 images). */
static unsigned sample_bucket(const mp_himg_sample *l)
{
    return l->age_ns == MP_HIMG_AGE_UNKNOWN ? MP_AGE_BUCKETS : mp_age_bucket(l->age_ns);
}

/* ------------------------------------------------------------ locating */

typedef struct cand_info {
    bool exists;
    char build_id[2 * MP_ELF_BUILD_ID_MAX + 1]; /* "" when the file has none */
    bool symtab;                                /* it has a .symtab with functions */
} cand_info;

static void inspect(const char *path, cand_info *ci)
{
    memset(ci, 0, sizeof *ci);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    ci->exists = true;
    uint8_t id[MP_ELF_BUILD_ID_MAX];
    mp_elf_hex(id, mp_elf_file_build_id(map, size, id), ci->build_id);
    mp_elf_symtab t;
    if (mp_elf_read_symbols(map, size, &t) == MP_ELF_OK) {
        ci->symtab = t.source == MP_ELF_SYMS_SYMTAB;
        mp_elf_symtab_free(&t);
    }
    munmap(map, size);
}

static size_t add_why(char *why, size_t whylen, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t add_why(char *why, size_t whylen, size_t at, const char *fmt, ...)
{
    if (why == NULL || at >= whylen)
        return at;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(why + at, whylen - at, fmt, ap);
    va_end(ap);
    return n < 0 ? at : at + (size_t)n;
}

mp_himg_where mp_himg_locate(const mp_himg_mapping *m, const char *binary_path, char **file,
                             char *why, size_t whylen)
{
    *file = NULL;
    if (why != NULL && whylen > 0)
        why[0] = '\0';
    if (!(m->flags & MP_HIMG_MAP_FILE))
        return MP_HIMG_NO_FILE;
    if (m->build_id[0] == '\0') {
        add_why(why, whylen, 0, "%s has no build-id: its file cannot be checked, not symbolized",
                m->path);
        return MP_HIMG_NO_BUILD_ID;
    }
    enum { NCAND = 5 };
    char *cand[NCAND] = {0};
    size_t n = 0;
    if (binary_path != NULL && binary_path[0] != '\0') {
        const char *base = strrchr(m->path, '/') != NULL ? strrchr(m->path, '/') + 1 : m->path;
        const char *id = m->build_id;
        if (asprintf(&cand[n], "%s/.build-id/%.2s/%s.debug", binary_path, id, id + 2) >= 0)
            n++;
        if (asprintf(&cand[n], "%s/.build-id/%.2s/%s", binary_path, id, id + 2) >= 0)
            n++;
        if (m->path[0] == '/' && asprintf(&cand[n], "%s%s", binary_path, m->path) >= 0)
            n++;
        if (asprintf(&cand[n], "%s/%s", binary_path, base) >= 0)
            n++;
    }
    cand[n] = strdup(m->path);
    if (cand[n] != NULL)
        n++;
    int first_ok = -1, best = -1;
    size_t at = 0;
    bool any = false;
    for (size_t i = 0; i < n && best < 0; i++) {
        cand_info ci;
        inspect(cand[i], &ci);
        if (!ci.exists)
            continue;
        any = true;
        if (strcmp(ci.build_id, m->build_id) != 0) {
            at = add_why(why, whylen, at, "%s%s has build-id %s", at ? "; " : "", cand[i],
                         ci.build_id[0] ? ci.build_id : "(none)");
            continue;
        }
        if (first_ok < 0)
            first_ok = (int)i;
        if (ci.symtab)
            best = (int)i;
    }
    if (best < 0)
        best = first_ok;
    mp_himg_where w;
    if (best >= 0) {
        *file = cand[best];
        cand[best] = NULL;
        w = MP_HIMG_FOUND;
        if (why != NULL && whylen > 0)
            why[0] = '\0';
    } else if (any) {
        add_why(why, whylen, at, "; the image needs %s: not symbolized", m->build_id);
        w = MP_HIMG_MISMATCH;
    } else {
        add_why(why, whylen, 0, "%s (build-id %s): no such file%s; not symbolized", m->path,
                m->build_id, binary_path != NULL ? " here or under --binary-path" : "");
        w = MP_HIMG_MISSING;
    }
    for (size_t i = 0; i < n; i++)
        free(cand[i]);
    return w;
}

/* --------------------------------------------------------------- pprof */

static mp_obj *obj_of(const mp_himg_mapping *m)
{
    mp_obj *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->path = strdup(m->path);
    o->segs = malloc(m->nsegs * sizeof *o->segs);
    if (o->path == NULL || o->segs == NULL) {
        free(o->path);
        free(o->segs);
        free(o);
        return NULL;
    }
    for (size_t j = 0; j < m->nsegs; j++)
        o->segs[j] = (mp_map_seg){(uintptr_t)m->segs[j].start, (uintptr_t)m->segs[j].limit,
                                  m->segs[j].file_offset};
    o->nsegs = m->nsegs;
    o->base = (uintptr_t)m->base;
    o->is_main = (m->flags & MP_HIMG_MAP_MAIN) != 0;
    o->loaded = (m->flags & MP_HIMG_MAP_LOADED) != 0;
    memcpy(o->build_id, m->build_id, strlen(m->build_id) + 1);
    return o;
}

/* The image's peak: its comments and its per-stack in-use sums. */
static mp_prof_status peak_samples(const mp_himg *img, mp_report_builder *b)
{
    double objects = 0;
    for (size_t i = 0; i < img->npeak; i++)
        objects += img->peak_sums[i].objects;
    mp_prof_peak_info pi = {
        .bytes = img->peak[MP_HIMG_PEAK_BYTES],
        .objects = (uint64_t)(objects + 0.5),
        .time_nanos = (int64_t)img->peak[MP_HIMG_PEAK_TIME_NS],
        .window_start_nanos = (int64_t)img->meta[MP_HIMG_META_INTERVAL_NS],
        .window_end_nanos = (int64_t)img->meta[MP_HIMG_META_SNAPSHOT_NS],
        .samples = img->peak[MP_HIMG_PEAK_SAMPLES],
        .incomplete = img->peak[MP_HIMG_PEAK_INCOMPLETE] != 0,
    };
    mp_prof_status st = mp_peak_comments(b, &pi);
    for (size_t i = 0; st == MP_PROF_OK && i < img->npeak; i++) {
        const mp_himg_interval *e = &img->peak_sums[i];
        const mp_himg_stack *s = &img->stacks[e->stack];
        double v[MP_VAL_COUNT] = {0, 0, e->objects, e->bytes};
        st = mp_report_add(b, s->pcs, s->depth, s->truncated, v, false);
    }
    return st;
}

mp_prof_status mp_himg_pprof(const mp_himg *img, const mp_himg_pprof_opts *opts, uint8_t **out,
                             size_t *len)
{
    mp_himg_pprof_opts none = {.symbolize = -1};
    if (opts == NULL)
        opts = &none;
    if (opts->peak && !img->has_peak)
        return MP_PROF_E_BAD_IMAGE; /* written before the peak existed */
    mp_prof_symbolize mode =
        opts->symbolize >= 0 ? (mp_prof_symbolize)opts->symbolize : img->cfg.symbolize;
    mp_report_cache *c = mp_report_cache_new();
    if (c == NULL)
        return MP_PROF_E_NOMEM;
    mp_prof_status st = MP_PROF_E_NOMEM;
    mp_maps *maps = mp_report_cache_maps(c);
    maps->fixed = true; /* the image's objects, never this process's */
    maps->valid = true;
    mp_himg_where *where = calloc(img->nmaps ? img->nmaps : 1, sizeof *where);
    char **why = calloc(img->nmaps ? img->nmaps : 1, sizeof *why);
    bool *used = calloc(img->nmaps ? img->nmaps : 1, sizeof *used);
    /* Live sums per (stack, age bucket): mask[k] has bit b set when stack
     * k has samples of bucket b (bit MP_AGE_BUCKETS: age unknown); the
     * stack's sums start at acc[2 * first[k]], one pair per set bit. */
    uint32_t *mask = calloc(img->nstacks ? img->nstacks : 1, sizeof *mask);
    size_t *first = calloc(img->nstacks ? img->nstacks : 1, sizeof *first);
    double *acc = NULL;
    mp_report_builder *b = NULL;
    if (where == NULL || why == NULL || used == NULL || mask == NULL || first == NULL)
        goto done;

    for (size_t i = 0; i < img->nmaps; i++) {
        const mp_himg_mapping *m = &img->maps[i];
        mp_obj *o = obj_of(m);
        if (o == NULL)
            goto done;
        char buf[2048];
        char *file = NULL;
        if (mode != MP_PROF_SYMBOLIZE_NONE) {
            where[i] = mp_himg_locate(m, opts->binary_path, &file, buf, sizeof buf);
            if (where[i] != MP_HIMG_FOUND && where[i] != MP_HIMG_NO_FILE &&
                (why[i] = strdup(buf)) == NULL) {
                free(file);
                free(o->segs);
                free(o->path);
                free(o);
                goto done;
            }
        }
        o->has_file = file != NULL;
        if (file != NULL && strcmp(file, m->path) != 0)
            o->sym_path = file;
        else
            free(file);
        if (!mp_maps_add(maps, o)) {
            free(o->path);
            free(o->sym_path);
            free(o->segs);
            free(o);
            goto done;
        }
    }

    /* Which mappings hold a frame (only those are worth a note). */
    for (size_t s = 0; s < img->nstacks; s++)
        for (uint32_t k = 0; k < img->stacks[s].depth; k++) {
            uintptr_t pc = img->stacks[s].pcs[k];
            const mp_map_ref *r = pc != 0 ? mp_maps_lookup(maps, pc - 1) : NULL;
            if (r != NULL)
                used[r->obj] = true;
        }
    if (opts->note != NULL)
        for (size_t i = 0; i < img->nmaps; i++)
            if (used[i] && why[i] != NULL)
                opts->note(opts->note_ctx, why[i]);

    uint64_t t0 = img->meta[MP_HIMG_META_INTERVAL_NS], t1 = img->meta[MP_HIMG_META_SNAPSHOT_NS];
    mp_report_options ro = {
        .period = img->cfg.sample_interval_bytes,
        .time_nanos = (int64_t)t0,
        .duration_nanos = t1 > t0 ? (int64_t)(t1 - t0) : 0,
        .symbolize = mode,
        .inuse_only = opts->peak,
    };
    if ((b = mp_report_begin(c, &ro)) == NULL)
        goto done;
    if (opts->peak) { /* the window's peak so far, as mp_profiler_report_peak() gives it */
        st = peak_samples(img, b);
        if (st != MP_PROF_OK)
            goto done;
        st = mp_report_finish(b, out, len);
        b = NULL;
        goto done;
    }
    for (size_t i = 0; i < img->ninterval; i++) {
        const mp_himg_interval *e = &img->interval[i];
        const mp_himg_stack *s = &img->stacks[e->stack];
        double v[MP_VAL_COUNT] = {e->objects, e->bytes, 0, 0};
        if ((st = mp_report_add(b, s->pcs, s->depth, s->truncated, v, true)) != MP_PROF_OK)
            goto done;
    }
    /* Live values summed per (stack, age bucket) in live-table order, as
     * report() does; ages are the samples' at the snapshot. */
    for (size_t i = 0; i < img->nlive; i++)
        mask[img->live[i].stack] |= 1u << sample_bucket(&img->live[i]);
    size_t pairs = 0;
    for (size_t k = 0; k < img->nstacks; k++) {
        first[k] = pairs;
        pairs += (size_t)__builtin_popcount(mask[k]);
    }
    if ((acc = calloc(pairs ? 2 * pairs : 1, sizeof *acc)) == NULL)
        goto done;
    for (size_t i = 0; i < img->nlive; i++) {
        const mp_himg_sample *l = &img->live[i];
        unsigned bk = sample_bucket(l);
        size_t at = first[l->stack] + (size_t)__builtin_popcount(mask[l->stack] & ((1u << bk) - 1));
        acc[2 * at] += l->weight;
        acc[2 * at + 1] += l->weight * (double)l->size;
    }
    for (size_t k = 0; k < img->nstacks; k++) {
        const mp_himg_stack *s = &img->stacks[k];
        size_t at = first[k];
        for (unsigned bk = 0; bk <= MP_AGE_BUCKETS; bk++) {
            if (!(mask[k] & 1u << bk))
                continue;
            double v[MP_VAL_COUNT] = {0, 0, acc[2 * at], acc[2 * at + 1]};
            at++;
            st = mp_report_add_aged(b, s->pcs, s->depth, s->truncated, v, false,
                                    bk == MP_AGE_BUCKETS ? MP_AGE_NONE : bk);
            if (st != MP_PROF_OK)
                goto done;
        }
    }
    st = mp_report_finish(b, out, len);
    b = NULL;
done:
    mp_report_abort(b);
    for (size_t i = 0; why != NULL && i < img->nmaps; i++)
        free(why[i]);
    free(why);
    free(where);
    free(used);
    free(acc);
    free(mask);
    free(first);
    mp_report_cache_free(c);
    return st;
}
