/* SPDX-License-Identifier: MIT */
/* Heap images: mp_profiler_write_image() saves the running session's
 * state through the image package (schema: heap_image_schema.h).
 *
 * Phases, all under g_rec.session (so no report, stop or fork runs
 * meanwhile, and every depot stack stays valid):
 *
 *   1. quiet     g_rec.rw exclusive, the same hold start and stop take: no
 *                sampling hit and no free of a sampled block is inside the
 *                recorder, so the rings, the shards, the live table and
 *                the counters agree with each other. Read (not consumed:
 *                the next report still gets them) the records waiting in
 *                rings and shards, per stack; copy the counters; mark the
 *                live table for a snapshot (mp_live_snap_begin). This is
 *                the only time allocating threads can wait on the image,
 *                and it costs what a drain of the rings costs;
 *   2. live      collect the live snapshot: each stripe is copied as it
 *                was at the quiet point, by the first hit or free that
 *                touches it or by this thread, one stripe lock at a time;
 *   3. mappings  refresh the report side's mappings (dl_iterate_phdr takes
 *                the loader lock: never under rw), after the quiet point,
 *                so that they hold every module a snapshot frame was
 *                captured in;
 *   4. build     an image heap: stacks (frames as `code` foreign units),
 *                samples, interval sums, mappings, config, counters;
 *   5. write     mp_img_write(): temporary file, fsync, rename. Outside
 *                the recorder lock: the process keeps allocating.
 *
 * A frame is a `code` unit only when the image library names it exactly
 * as this process's mappings do (same build-id, offset = address - the
 * mapping's bias; checked once per object through mp_img_code_lookup());
 * otherwise its address goes to the stack's raw words. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mimprof/image.h>

#include "hash.h"
#include "heap_image_schema.h"
#include "heap_image_write.h"
#include "index.h"
#include "internal.h"
#include "peak.h"
#include "platform/platform.h"
#include "report/maps.h"
#include "report/report_internal.h"
#include "session.h"

/* ------------------------------------------------------------ pointer map */

typedef struct pmap_pair {
    const void *k;
    size_t v;
} pmap_pair;

/* Invariant: e[0 .. n) are the pairs in insertion order, each in ix. */
typedef struct pmap {
    pmap_pair *e;
    size_t n, cap;
    mp_index ix;
} pmap;

/* The value slot of key p, inserted with `fresh` when absent; NULL on
 * out-of-memory. *added says whether it was inserted. The slot is valid
 * until the next insertion. */
static size_t *pmap_put(pmap *m, const void *p, size_t fresh, bool *added)
{
    *added = false;
    if (!mp_index_reserve(&m->ix))
        return NULL;
    mp_index_probe pr = mp_index_start(&m->ix, mp_hash_ptr((uintptr_t)p));
    uint32_t i;
    while (mp_index_next(&pr, &i))
        if (m->e[i].k == p)
            return &m->e[i].v;
    if (!mp_array_reserve((void **)&m->e, &m->cap, m->n + 1, sizeof *m->e))
        return NULL;
    m->e[m->n] = (pmap_pair){p, fresh};
    mp_index_put(&m->ix, &pr, (uint32_t)m->n);
    *added = true;
    return &m->e[m->n++].v;
}

static void pmap_free(pmap *m)
{
    free(m->e);
    mp_index_free(&m->ix);
    *m = (pmap){0};
}

/* --------------------------------------------------------------- snapshot */

typedef struct ivl {
    const mp_stack *stack;
    double objects, bytes;
    uint64_t records;
} ivl;

typedef struct snap {
    pmap ivl_of; /* stack -> index in ivl */
    ivl *ivl;
    size_t nivl, ivl_cap;
    bool oom;
    mp_live_sample *live;
    size_t nlive;
    mp_prof_stats counters;
    uint64_t snapshot_wall, interval_start_wall;
    mp_agg peak; /* the window's peak so far, per stack (peak.c) */
    mp_peak_result peak_res;
    uint64_t snapshot_mono; /* mp_now_nanos() of the instant: the ages' reference */
} snap;

static void on_peek(void *ctx, const mp_stack *stack, double objects, double bytes,
                    uint64_t records)
{
    snap *sn = ctx;
    if (sn->oom)
        return;
    bool added;
    size_t *slot = pmap_put(&sn->ivl_of, stack, sn->nivl, &added);
    if (slot == NULL) {
        sn->oom = true;
        return;
    }
    if (added) {
        if (!mp_array_reserve((void **)&sn->ivl, &sn->ivl_cap, sn->nivl + 1, sizeof *sn->ivl)) {
            sn->oom = true;
            return;
        }
        sn->ivl[sn->nivl++] = (ivl){stack, 0, 0, 0};
    }
    ivl *e = &sn->ivl[*slot];
    e->objects += objects;
    e->bytes += bytes;
    e->records += records;
}

static void snap_free(snap *sn)
{
    mp_agg_free(&sn->peak);
    pmap_free(&sn->ivl_of);
    free(sn->ivl);
    free(sn->live);
}

/* ------------------------------------------------------------------ build */

static mp_img_word dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (mp_img_word)u;
}

typedef struct builder {
    mp_img_heap *h;
    const mp_himg_types *T;
    mp_maps *maps;
    signed char *obj_ok; /* per maps object: 0 unknown, 1 named by code, -1 raw */
    pmap stack_obj;      /* mp_stack -> image object */
    bool no_code;        /* name nothing: every frame raw */
} builder;

/* Whether the image library names pc as code(build-id, path, pc - bias)
 * with this process's mapping's build-id and bias: checked once per
 * mapping object, with the first frame met in it. */
static bool named_by_code(builder *b, uintptr_t pc)
{
    if (b->no_code || pc == 0)
        return false;
    const mp_map_ref *r = mp_maps_lookup(b->maps, pc - 1);
    if (r == NULL || pc >= r->limit)
        return false;
    const mp_obj *o = b->maps->objs[r->obj];
    if (!o->loaded || o->build_id[0] == '\0')
        return false;
    if (b->obj_ok[r->obj] == 0) {
        mp_img_code c;
        char hex[2 * MP_ELF_BUILD_ID_MAX + 1];
        bool ok = mp_img_code_lookup(NULL, pc, &c) && c.address == pc && c.build_id_len > 0 &&
                  c.build_id_len <= MP_ELF_BUILD_ID_MAX && c.offset == pc - o->base;
        if (ok) {
            mp_elf_hex(c.build_id, c.build_id_len, hex);
            ok = strcmp(hex, o->build_id) == 0;
        }
        b->obj_ok[r->obj] = ok ? 1 : -1;
    }
    return b->obj_ok[r->obj] > 0;
}

static void *stack_object(builder *b, const mp_stack *s)
{
    bool added;
    size_t *slot = pmap_put(&b->stack_obj, s, 0, &added);
    if (slot == NULL)
        return NULL;
    if (!added)
        return (void *)*slot;
    mp_img_word *o = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_STACK], MP_HIMG_STACK_HEAD + s->depth);
    if (o == NULL)
        return NULL;
    o[1] = s->truncated ? MP_HIMG_STACK_TRUNCATED : 0;
    mp_img_word *raw = NULL;
    for (uint32_t i = 0; i < s->depth; i++) {
        uintptr_t pc = s->pcs[i];
        if (named_by_code(b, pc)) {
            o[MP_HIMG_STACK_HEAD + i] = pc;
            continue;
        }
        if (raw == NULL) {
            raw = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_WORDS], 1 + (size_t)s->depth);
            if (raw == NULL)
                return NULL;
            o[2] = (mp_img_word)raw;
        }
        raw[1 + i] = pc;
    }
    *slot = (size_t)o;
    return o;
}

static mp_img_word *words(builder *b, size_t n)
{
    return mp_img_alloc(b->h, b->T->t[MP_HIMG_T_WORDS], 1 + n);
}

static mp_img_word *str(builder *b, const char *s)
{
    mp_img_word *o = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_STR], 2);
    if (o != NULL) {
        o[0] = strlen(s);
        o[1] = (mp_img_word)s; /* written before s can change (session lock held) */
    }
    return o;
}

static bool root(builder *b, const char *name, void *obj)
{
    return obj != NULL && mp_img_root_set(b->h, name, obj, NULL) == MP_IMG_OK;
}

/* The live samples grouped by stack, in the order the live table first
 * meets each stack; within a stack in live-table order. */
static mp_img_word *live_groups(builder *b, const snap *sn)
{
    pmap group_of = {0};
    size_t *count = NULL, *fill = NULL, ngroups = 0, cap = 0;
    mp_img_word **words = NULL, *list = NULL;
    uint32_t *group = malloc((sn->nlive ? sn->nlive : 1) * sizeof *group); /* of each sample */
    bool ok = group != NULL;
    for (size_t i = 0; i < sn->nlive && ok; i++) {
        bool added;
        size_t *g = pmap_put(&group_of, sn->live[i].stack, ngroups, &added);
        if (g == NULL) {
            ok = false;
            break;
        }
        if (added) {
            if (!mp_array_reserve((void **)&count, &cap, ngroups + 1, sizeof *count)) {
                ok = false;
                break;
            }
            count[ngroups++] = 0;
        }
        count[*g]++;
        group[i] = (uint32_t)*g;
    }
    if (ok)
        ok = (list = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_REFS], 1 + ngroups)) != NULL &&
             (words = calloc(ngroups ? ngroups : 1, sizeof *words)) != NULL &&
             (fill = calloc(ngroups ? ngroups : 1, sizeof *fill)) != NULL;
    for (size_t i = 0; i < sn->nlive && ok; i++) {
        const mp_live_sample *l = &sn->live[i];
        size_t g = group[i];
        if (words[g] == NULL) {
            mp_img_word *grp = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_LIVE], MP_HIMG_LIVE_UNITS);
            words[g] =
                mp_img_alloc(b->h, b->T->t[MP_HIMG_T_WORDS], 1 + MP_HIMG_SAMPLE_WORDS * count[g]);
            if (grp == NULL || words[g] == NULL ||
                (grp[0] = (mp_img_word)stack_object(b, l->stack)) == 0) {
                ok = false;
                break;
            }
            grp[1] = (mp_img_word)words[g];
            list[1 + g] = (mp_img_word)grp;
        }
        mp_img_word *w = words[g] + 1 + MP_HIMG_SAMPLE_WORDS * fill[g]++;
        w[0] = l->size;
        w[1] = dbits(l->weight);
        w[2] = l->gen;
        w[3] = sn->snapshot_mono > l->born ? sn->snapshot_mono - l->born : 0;
    }
    pmap_free(&group_of);
    free(group);
    free(count);
    free(fill);
    free(words);
    return ok ? list : NULL;
}

/* The peak's per-stack sums as a refs list of `mimprof.interval` objects
 * (count in slot 0); NULL on out-of-memory. */
static mp_img_word *peak_sums(builder *b, const snap *sn)
{
    mp_img_word *list = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_REFS], 1 + sn->peak.count);
    if (list == NULL)
        return NULL;
    size_t n = 0; /* every entry has live sums: peak.c adds nothing else */
    for (size_t i = 0; i < sn->peak.count; i++) {
        const mp_agg_entry *e = &sn->peak.e[i];
        mp_img_word *o = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_INTERVAL], MP_HIMG_INTERVAL_UNITS);
        if (o == NULL || (o[0] = (mp_img_word)stack_object(b, e->stack)) == 0)
            return NULL;
        o[1] = dbits(e->v[MP_VAL_INUSE_OBJECTS]);
        o[2] = dbits(e->v[MP_VAL_INUSE_SPACE]);
        o[3] = e->n_live;
        list[1 + n++] = (mp_img_word)o;
    }
    return list;
}

/* Builds the image heap of a snapshot; false on out-of-memory. */
static bool build(builder *b, const mp_profiler *p, const snap *sn)
{
    mp_img_word *live = live_groups(b, sn);
    mp_img_word *ivls = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_REFS], 1 + sn->nivl);
    if (live == NULL || ivls == NULL)
        return false;
    for (size_t i = 0; i < sn->nivl; i++) {
        const ivl *e = &sn->ivl[i];
        mp_img_word *o = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_INTERVAL], MP_HIMG_INTERVAL_UNITS);
        if (o == NULL || (o[0] = (mp_img_word)stack_object(b, e->stack)) == 0)
            return false;
        o[1] = dbits(e->objects);
        o[2] = dbits(e->bytes);
        o[3] = e->records;
        ivls[1 + i] = (mp_img_word)o;
    }
    mp_img_word *peak = peak_sums(b, sn), *pmeta = words(b, MP_HIMG_PEAK_COUNT);
    if (peak == NULL || pmeta == NULL)
        return false;
    const mp_peak_result *pr = &sn->peak_res;
    pmeta[1 + MP_HIMG_PEAK_BYTES] = pr->bytes < 0.5 ? 0 : (mp_img_word)(pr->bytes + 0.5);
    pmeta[1 + MP_HIMG_PEAK_TIME_NS] = pr->wall_ns;
    pmeta[1 + MP_HIMG_PEAK_NSTACKS] = sn->peak.count;
    pmeta[1 + MP_HIMG_PEAK_SAMPLES] = pr->samples;
    pmeta[1 + MP_HIMG_PEAK_INCOMPLETE] = pr->incomplete || sn->peak.oom;

    mp_img_word *maps = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_REFS], 1 + b->maps->nobjs);
    if (maps == NULL)
        return false;
    for (size_t i = 0; i < b->maps->nobjs; i++) {
        const mp_obj *o = b->maps->objs[i];
        mp_img_word *m = mp_img_alloc(b->h, b->T->t[MP_HIMG_T_MAPPING], MP_HIMG_MAPPING_UNITS);
        mp_img_word *segs = words(b, 3 * o->nsegs);
        if (m == NULL || segs == NULL || (m[0] = (mp_img_word)str(b, o->path)) == 0 ||
            (m[1] = (mp_img_word)str(b, o->build_id)) == 0)
            return false;
        for (size_t j = 0; j < o->nsegs; j++) {
            segs[1 + 3 * j] = o->segs[j].start;
            segs[2 + 3 * j] = o->segs[j].limit;
            segs[3 + 3 * j] = (mp_img_word)o->segs[j].file_offset;
        }
        m[2] = (mp_img_word)segs;
        m[3] = o->base;
        m[4] = (o->is_main ? MP_HIMG_MAP_MAIN : 0) | (o->has_file ? MP_HIMG_MAP_FILE : 0) |
               (o->loaded ? MP_HIMG_MAP_LOADED : 0);
        maps[1 + i] = (mp_img_word)m;
    }

    mp_img_word *meta = words(b, MP_HIMG_META_COUNT);
    mp_img_word *cfg = words(b, MP_HIMG_CFG_COUNT);
    mp_img_word *ctr = words(b, MP_HIMG_CTR_COUNT);
    if (meta == NULL || cfg == NULL || ctr == NULL)
        return false;
    mp_img_word *m = meta + 1, *c = cfg + 1, *k = ctr + 1;
    m[MP_HIMG_META_SCHEMA] = MP_HIMG_SCHEMA;
    m[MP_HIMG_META_PID] = (mp_img_word)getpid();
    m[MP_HIMG_META_SNAPSHOT_NS] = sn->snapshot_wall;
    m[MP_HIMG_META_INTERVAL_NS] = sn->interval_start_wall;
    m[MP_HIMG_META_GENERATION] = p->gen;
    m[MP_HIMG_META_NLIVE] = sn->nlive;
    m[MP_HIMG_META_NINTERVAL] = sn->nivl;
    m[MP_HIMG_META_NSTACKS] = b->stack_obj.n;
    c[MP_HIMG_CFG_INTERVAL] = p->cfg.sample_interval_bytes;
    c[MP_HIMG_CFG_MAX_DEPTH] = p->cfg.max_stack_depth;
    c[MP_HIMG_CFG_RING] = p->cfg.ring_capacity;
    c[MP_HIMG_CFG_MAX_LIVE] = p->cfg.max_live_samples;
    c[MP_HIMG_CFG_SEED] = p->cfg.seed;
    c[MP_HIMG_CFG_SYMBOLIZE] = (mp_img_word)p->cfg.symbolize;
    c[MP_HIMG_CFG_OVERFLOW] = p->cfg.overflow_stacks;
    c[MP_HIMG_CFG_REPORT_MAX] = p->cfg.report_max_records;
    mp_himg_counters_put(k, &sn->counters);

    return root(b, MP_HIMG_ROOT_META, meta) && root(b, MP_HIMG_ROOT_CONFIG, cfg) &&
           root(b, MP_HIMG_ROOT_COUNTERS, ctr) && root(b, MP_HIMG_ROOT_MAPPINGS, maps) &&
           root(b, MP_HIMG_ROOT_LIVE, live) && root(b, MP_HIMG_ROOT_INTERVAL, ivls) &&
           root(b, MP_HIMG_ROOT_PEAK, peak) && root(b, MP_HIMG_ROOT_PEAK_META, pmeta) &&
           root(b, MP_HIMG_ROOT_VERSION, str(b, MP_PROF_PACKAGE_VERSION));
}

/* Builds and writes one image; the image library's status. */
static mp_img_status build_and_write(mp_img_registry *reg, const mp_himg_types *T, mp_maps *maps,
                                     const mp_profiler *p, const snap *sn, bool no_code,
                                     const char *path, mp_img_error *err, uint64_t *write_ns)
{
    builder b = {.T = T, .maps = maps, .no_code = no_code};
    mp_img_status st = mp_img_heap_new(reg, &b.h, err);
    if (st != MP_IMG_OK)
        return st;
    b.obj_ok = calloc(maps->nobjs ? maps->nobjs : 1, 1);
    if (b.obj_ok == NULL || !build(&b, p, sn)) {
        st = MP_IMG_E_NOMEM;
        if (err != NULL)
            err->status = st;
    } else {
        uint64_t t = mp_now_nanos();
        st = mp_img_write(b.h, path, err);
        *write_ns = mp_now_nanos() - t;
    }
    pmap_free(&b.stack_obj);
    free(b.obj_ok);
    mp_img_heap_free(b.h);
    return st;
}

/* --------------------------------------------------------------- timings */

static struct {
    _Atomic uint64_t quiet_ns, copy_ns, total_ns, write_ns, live;
} g_timing;

void mp_himg_last_timing(mp_himg_timing *out)
{
    out->quiet_ns = atomic_load_explicit(&g_timing.quiet_ns, memory_order_relaxed);
    out->stripe_copy_ns = atomic_load_explicit(&g_timing.copy_ns, memory_order_relaxed);
    out->total_ns = atomic_load_explicit(&g_timing.total_ns, memory_order_relaxed);
    out->write_ns = atomic_load_explicit(&g_timing.write_ns, memory_order_relaxed);
    out->live_samples = atomic_load_explicit(&g_timing.live, memory_order_relaxed);
}

/* ------------------------------------------------------------------ entry */

static mp_prof_status from_img(mp_img_status st)
{
    switch (st) {
    case MP_IMG_OK:
        return MP_PROF_OK;
    case MP_IMG_E_NOMEM:
        return MP_PROF_E_NOMEM;
    case MP_IMG_E_IO:
        return MP_PROF_E_IO;
    case MP_IMG_E_LIMIT:
        return MP_PROF_E_UNSUPPORTED;
    default:
        return MP_PROF_E_INTERNAL;
    }
}

mp_prof_status mp_profiler_write_image(mp_profiler *p, const char *path)
{
    if (p == NULL || path == NULL || path[0] == '\0')
        return MP_PROF_E_INVALID_CONFIG;
    /* Frames are saved as code(build-id, path, offset) of ELF objects and
     * read back with the ELF reader: not on Mach-O, and not without the
     * loader's mappings (generic backend). */
    if (!mp_plat_caps_get()->heap_images)
        return MP_PROF_E_UNSUPPORTED;
#if UINTPTR_MAX < UINT64_MAX
    return MP_PROF_E_UNSUPPORTED; /* weights are stored as 64-bit doubles in words */
#else
    mp_prof_status st = MP_PROF_OK;
    mp_img_registry *reg = NULL;
    mp_himg_types T;
    snap sn = {0};
    mp_guard_enter();
    pthread_mutex_lock(&g_rec.session);
    uint64_t t0 = mp_now_nanos();
    if (!mp_session_owns_locked(p)) {
        st = MP_PROF_E_INACTIVE;
        goto unlock;
    }
    if ((p->cache == NULL && (p->cache = mp_report_cache_new()) == NULL) ||
        mp_himg_registry_new(&reg, &T, NULL) != MP_IMG_OK) {
        st = MP_PROF_E_NOMEM;
        goto unlock;
    }

    /* 1. quiet */
    sn.interval_start_wall = p->interval_start_wall;
    uint64_t q0 = mp_now_nanos();
    mp_rw_wrlock(&g_rec.rw);
    sn.snapshot_wall = mp_wall_nanos();
    sn.snapshot_mono = mp_now_nanos();
    mp_prof_diagnostics(&sn.counters);
    mp_rec_peek(on_peek, &sn);
    bool marked = !sn.oom && mp_live_snap_begin(p->gen);
    mp_rw_wrunlock(&g_rec.rw);
    uint64_t quiet = mp_now_nanos() - q0;

    /* 2. live */
    uint64_t max_copy = 0;
    if (marked)
        sn.nlive = mp_live_snap_collect(&sn.live, &max_copy);
    if (!marked || (sn.live == NULL && sn.nlive != 0)) {
        st = MP_PROF_E_NOMEM;
        goto unlock;
    }

    /* The window's peak so far (the window goes on: the next report
     * still closes it). */
    (void)mp_peak_peek(p->gen, &sn.peak, &sn.peak_res);

    /* 3. mappings, after the quiet point (dl_iterate_phdr takes the
     * loader lock: never under rw), so that every module a snapshot frame
     * was captured in, and that is still loaded, is in them. */
    mp_report_cache_refresh(p->cache); /* a failed refresh keeps the last list */
    mp_maps *maps = mp_report_cache_maps(p->cache);

    /* 4, 5. build and write; a module unloaded since step 3 makes the
     * image library refuse a frame we named: refresh and build again once,
     * then with every frame raw (still correct, only less portable). */
    uint64_t write_ns = 0;
    mp_img_error err;
    mp_img_status ist = build_and_write(reg, &T, maps, p, &sn, false, path, &err, &write_ns);
    if (ist == MP_IMG_E_UNNAMEABLE) {
        mp_report_cache_refresh(p->cache);
        ist = build_and_write(reg, &T, maps, p, &sn, false, path, &err, &write_ns);
        if (ist == MP_IMG_E_UNNAMEABLE)
            ist = build_and_write(reg, &T, maps, p, &sn, true, path, &err, &write_ns);
    }
    st = from_img(ist);
    if (st == MP_PROF_OK) {
        atomic_store_explicit(&g_timing.quiet_ns, quiet, memory_order_relaxed);
        atomic_store_explicit(&g_timing.copy_ns, max_copy, memory_order_relaxed);
        atomic_store_explicit(&g_timing.write_ns, write_ns, memory_order_relaxed);
        atomic_store_explicit(&g_timing.total_ns, mp_now_nanos() - t0, memory_order_relaxed);
        atomic_store_explicit(&g_timing.live, sn.nlive, memory_order_relaxed);
    }
unlock:
    snap_free(&sn);
    mp_img_registry_free(reg);
    pthread_mutex_unlock(&g_rec.session);
    mp_guard_exit();
    return st;
#endif
}
