/* SPDX-License-Identifier: MIT */
/* Heap images in process: mp_profiler_write_image()'s rules, an image
 * equals the report of the same state, the image does not consume what the
 * next report gets, writing while 4 threads allocate and free, and the
 * reader's refusals (the image package's for damaged or mismatched files,
 * the schema's for well-formed files that are not heap images). */
#include "../helpers.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mimprof/image.h>
#include <mimprof/sys.h>

#include <mimprof/profiling_image.h>

#include "heap_image.h"
#include "heap_image_write.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

static void observe(void) { tmi_dealloc(tmi_alloc(16, 8), 16, 8); }

static mp_prof_stats stats(void)
{
    mp_prof_stats s;
    mp_prof_diagnostics(&s);
    return s;
}

/* A fresh directory for one test's files. */
static char *scratch(void)
{
    char *d = strdup("/tmp/himg-test-XXXXXX");
    cr_assert_not_null(mkdtemp(d));
    return d;
}

static char *path_in(const char *dir, const char *name)
{
    char *p;
    cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
    return p;
}

static void rm_rf(char *dir)
{
    char *cmd;
    cr_assert_geq(asprintf(&cmd, "rm -rf '%s'", dir), 0);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(dir);
}

/* Sleeps (no CPU): lets live samples age. */
static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static mp_himg *load_ok(const char *path)
{
    mp_himg *img = NULL;
    char err[1024] = "";
    cr_assert_eq(mp_himg_load(path, &img, err, sizeof err), 0, "load %s: %s", path, err);
    return img;
}

/* The error mp_himg_load gives for `path` (it must refuse). */
static void load_refused(const char *path, const char *expect)
{
    mp_himg *img = NULL;
    char err[1024] = "";
    cr_assert_neq(mp_himg_load(path, &img, err, sizeof err), 0, "%s was loaded", path);
    cr_assert_null(img);
    cr_assert_not_null(strstr(err, expect), "refusal of %s: '%s', expected '%s'", path, err,
                       expect);
}

void *site_live(size_t size);
__attribute__((noinline)) void *site_live(size_t size)
{
    void *p = tmi_alloc(size, 8);
    TEST_NO_TAIL(p);
    return p;
}

void site_freed(size_t size);
__attribute__((noinline)) void site_freed(size_t size)
{
    void *p = tmi_alloc(size, 8);
    TEST_NO_TAIL(p);
    tmi_dealloc(p, size, 8);
}

/* ------------------------------------------------------------------ rules */

Test(image, arguments_and_session_state, .timeout = 60)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "a.mpimg");
    mp_prof_config c = test_config(4096, 1);
    mp_profiler *p = test_start(&c);
    cr_assert_eq(mp_profiler_write_image(NULL, file), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_write_image(p, NULL), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_write_image(p, ""), MP_PROF_E_INVALID_CONFIG);
    /* an unwritable place: an error, and nothing left behind */
    char *nodir = path_in(dir, "missing/a.mpimg");
    cr_assert_eq(mp_profiler_write_image(p, nodir), MP_PROF_E_IO);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    struct stat st;
    cr_assert_eq(stat(file, &st), 0);
    cr_assert_eq(mp_profiler_stop(p), MP_PROF_OK);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_E_INACTIVE);
    /* a stopped owner cannot write a later session's state */
    mp_profiler *q = test_start(&c);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_E_INACTIVE);
    mp_profiler_free(q);
    mp_profiler_free(p);
    free(nodir);
    free(file);
    rm_rf(dir);
}

/* With a 1-byte interval every block of >= 40 bytes is sampled with weight
 * 1, so the counts are exact. */
Test(image, holds_the_state_and_does_not_consume_the_next_report, .timeout = 60)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "a.mpimg");
    mp_prof_config c = test_config(1, 7);
    mp_profiler *p = test_start(&c);
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = site_live(64);
    for (int i = 0; i < 50; i++)
        site_freed(128);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    mp_prof_stats s = stats();
    cr_assert_eq(s.samples_taken, 150);
    cr_assert_eq(s.ring_records + s.overflow_records, 150, "the image consumed records");

    mp_himg *img = load_ok(file);
    cr_assert_eq(img->nlive, 100);
    double objects, bytes;
    mp_himg_live_totals(img, &objects, &bytes);
    cr_assert_float_eq(objects, 100.0, 1e-9);
    cr_assert_float_eq(bytes, 6400.0, 1e-9);
    uint64_t records = 0;
    double io = 0;
    for (size_t i = 0; i < img->ninterval; i++) {
        records += img->interval[i].records;
        io += img->interval[i].objects;
    }
    cr_assert_eq(records, 150);
    cr_assert_float_eq(io, 150.0, 1e-9);
    cr_assert_eq(img->counters.samples_taken, 150);
    cr_assert_eq(img->cfg.sample_interval_bytes, 1);
    cr_assert_eq(img->cfg.seed, 7);
    cr_assert_eq(img->meta[MP_HIMG_META_PID], (uint64_t)getpid());
    for (size_t i = 0; i < img->nlive; i++)
        cr_assert_eq(img->live[i].gen, img->meta[MP_HIMG_META_GENERATION]);
    cr_assert_str_eq(img->version, mp_prof_version());
    mp_himg_free(img);

    /* The report after the image still has everything. */
    tp_profile r;
    test_report(p, &r);
    cr_assert_eq(test_sum(&r, "alloc_objects", 1), 150);
    cr_assert_eq(test_sum(&r, "inuse_objects", 0), 100);
    tp_free(&r);
    s = stats();
    cr_assert_eq(s.samples_taken, s.samples_reported);
    mp_profiler_free(p);
    for (int i = 0; i < 100; i++)
        tmi_dealloc(keep[i], 64, 8);
    free(file);
    rm_rf(dir);
}

/* The sample whose stack's innermost location has `address`, and whether
 * it is an interval sample. */
static const tp_sample *find_sample(const tp_profile *p, const tp_sample *like,
                                    const tp_profile *from)
{
    const char *d = tp_label_str(from, like, "__delta__");
    for (size_t i = 0; i < p->nsamples; i++) {
        const tp_sample *s = &p->samples[i];
        if (s->nlocations != like->nlocations)
            continue;
        const char *e = tp_label_str(p, s, "__delta__");
        if ((d == NULL) != (e == NULL))
            continue;
        int64_t age_a = -1, age_b = -1;
        const char *unit;
        tp_label_num(p, s, "age", &age_a, &unit);
        tp_label_num(from, like, "age", &age_b, &unit);
        if (age_a != age_b)
            continue;
        bool same = true;
        for (size_t k = 0; k < s->nlocations && same; k++) {
            const tp_location *a = tp_location_by_id(p, s->location_ids[k]);
            const tp_location *b = tp_location_by_id(from, like->location_ids[k]);
            same = a != NULL && b != NULL && a->address == b->address &&
                   a->mapping_id == b->mapping_id;
        }
        if (same)
            return s;
    }
    return NULL;
}

Test(image, pprof_of_the_image_equals_the_report, .timeout = 120)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "a.mpimg");
    mp_prof_config c = test_config(4096, 3);
    mp_profiler *p = test_start(&c);
    void *keep[300];
    for (int i = 0; i < 300; i++)
        keep[i] = site_live((size_t)(1000 + 37 * i));
    for (int i = 0; i < 3000; i++)
        site_freed(700);
    /* Ages of 1.2 s and a bit: mid-bucket (1s..3s) at the image and at
     * the report right after it, so both label every live sample alike. */
    sleep_ms(1200);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    tp_profile live;
    test_report(p, &live);
    for (size_t i = 0; i < live.nsamples; i++) {
        int64_t age;
        const char *unit;
        if (tp_label_str(&live, &live.samples[i], "__delta__") == NULL)
            cr_assert(tp_label_num(&live, &live.samples[i], "age", &age, &unit) && age == 1,
                      "live sample %zu", i);
    }

    mp_himg *img = load_ok(file);
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_himg_pprof_opts o = {.symbolize = -1};
    cr_assert_eq(mp_himg_pprof(img, &o, &buf, &len), MP_PROF_OK);
    tp_profile off;
    cr_assert(tp_decode(buf, len, &off));
    free(buf);
    mp_himg_free(img);

    cr_assert_eq(off.nsamples, live.nsamples);
    cr_assert_gt(live.nsamples, 1);
    cr_assert_eq(off.nmappings, live.nmappings);
    for (size_t i = 0; i < live.nmappings; i++) {
        const tp_mapping *a = &live.mappings[i], *b = &off.mappings[i];
        cr_assert_eq(a->id, b->id);
        cr_assert_eq(a->start, b->start);
        cr_assert_eq(a->limit, b->limit);
        cr_assert_eq(a->offset, b->offset);
        cr_assert_str_eq(tp_str(&live, a->filename), tp_str(&off, b->filename));
        cr_assert_str_eq(tp_str(&live, a->build_id), tp_str(&off, b->build_id));
    }
    for (size_t i = 0; i < live.nsamples; i++) {
        const tp_sample *s = &live.samples[i];
        const tp_sample *t = find_sample(&off, s, &live);
        cr_assert_not_null(t, "live sample %zu has no twin in the image's profile", i);
        for (size_t k = 0; k < s->nvalues; k++) {
            int64_t d = s->values[k] - t->values[k];
            /* interval sums may be added in another order: last-bit
             * differences can move a rounding by one */
            cr_assert_leq(d < 0 ? -d : d, k < 2 ? 1 : 0, "sample %zu value %zu: %lld vs %lld", i, k,
                          (long long)s->values[k], (long long)t->values[k]);
        }
    }
    cr_assert_eq(off.period, live.period);
    tp_free(&live);
    tp_free(&off);
    mp_profiler_free(p);
    for (int i = 0; i < 300; i++)
        tmi_dealloc(keep[i], (size_t)(1000 + 37 * i), 8);
    free(file);
    rm_rf(dir);
}

/* The image holds the window's peak so far: a spike allocated and freed
 * before the image is in it, as in the peak the next report closes (no
 * allocation between the two: the same set). */
Test(image, holds_the_windows_peak, .timeout = 120)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "peak.mpimg");
    mp_prof_config c = test_config(4096, 9);
    mp_profiler *p = test_start(&c);
    void *keep[100], *spike[2000];
    for (int i = 0; i < 100; i++)
        keep[i] = site_live(4000);
    for (int i = 0; i < 2000; i++)
        spike[i] = site_live(8192);
    for (int i = 0; i < 2000; i++)
        tmi_dealloc(spike[i], 8192, 8);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    tp_profile live, pk;
    test_report(p, &live);
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_prof_peak_info info;
    cr_assert_eq(mp_profiler_report_peak(p, &buf, &len, &info), MP_PROF_OK);
    cr_assert(tp_decode(buf, len, &pk));
    mp_prof_buffer_free(buf);

    mp_prof_image *img;
    char why[512];
    cr_assert_eq(mp_prof_image_open(file, &img, why, sizeof why), MP_PROF_OK, "%s", why);
    mp_prof_image_info ii;
    mp_prof_image_info_get(img, &ii);
    cr_assert(ii.has_peak);
    cr_assert_eq(ii.peak_bytes, info.bytes);
    cr_assert_eq(ii.peak_time_ns, info.time_nanos);
    cr_assert_gt(info.bytes, 2000 * 8192 * 0.8, "the spike is in the peak");
    mp_prof_image_pprof_opts o = {.symbolize = -1, .peak = 1};
    cr_assert_eq(mp_prof_image_pprof(img, &o, &buf, &len), MP_PROF_OK);
    tp_profile off;
    cr_assert(tp_decode(buf, len, &off));
    mp_prof_buffer_free(buf);
    mp_prof_image_free(img);
    cr_assert_eq(off.nsample_types, 2);
    cr_assert_eq(tp_total(&off, "inuse_space"), tp_total(&pk, "inuse_space"));
    cr_assert_eq(tp_total(&off, "inuse_objects"), tp_total(&pk, "inuse_objects"));
    cr_assert_eq(off.nsamples, pk.nsamples);
    cr_assert_lt(tp_total(&live, "inuse_space"), tp_total(&off, "inuse_space") / 4,
                 "the report after the spike does not hold it");
    tp_free(&live);
    tp_free(&pk);
    tp_free(&off);
    mp_profiler_free(p);
    for (int i = 0; i < 100; i++)
        tmi_dealloc(keep[i], 4000, 8);
    free(file);
    rm_rf(dir);
}

/* Frames the image cannot name by code: in a module without a build-id,
 * and in a module unloaded before the image was written. They travel as
 * raw addresses and come back with the same locations and mappings. */
static void *alloc_cb(size_t size) { return tmi_alloc(size, 8); }

typedef void *(*dl_alloc_fn)(void *(*)(size_t), size_t);

static dl_alloc_fn dl_alloc_of(void *h)
{
    void *sym = dlsym(h, "himg_dl_alloc");
    dl_alloc_fn f;
    cr_assert_not_null(sym, "%s", dlerror());
    memcpy(&f, &sym, sizeof f); /* object to function pointer, as POSIX allows */
    return f;
}

Test(image, frames_without_build_id_or_unloaded_stay_addresses, .timeout = 120)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "raw.mpimg");
    void *noid = dlopen(HIMG_DL_NOID, RTLD_NOW);
    void *withid = dlopen(HIMG_DL, RTLD_NOW);
    cr_assert_not_null(noid, "%s", dlerror());
    cr_assert_not_null(withid, "%s", dlerror());
    dl_alloc_fn f_noid = dl_alloc_of(noid), f_id = dl_alloc_of(withid);
    mp_prof_config c = test_config(1, 9);
    mp_profiler *p = test_start(&c);
    void *a = f_noid(alloc_cb, 4096), *b = f_id(alloc_cb, 8192);
    /* a report sees the module loaded; then it goes away */
    tp_profile first;
    test_report(p, &first);
    tp_free(&first);
    cr_assert_eq(dlclose(withid), 0);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    tp_profile live;
    test_report(p, &live);

    mp_himg *img = load_ok(file);
    uint32_t raw = 0;
    for (size_t i = 0; i < img->nstacks; i++)
        raw += img->stacks[i].depth - img->stacks[i].named;
    cr_assert_geq(raw, 2, "frames in both modules are raw");
    /* the unloaded module is kept as a mapping (not loaded, with its
     * build-id), and the module without one has an empty build-id */
    bool unloaded = false, noid_seen = false;
    for (size_t i = 0; i < img->nmaps; i++) {
        const mp_himg_mapping *m = &img->maps[i];
        if (strstr(m->path, "libhimg-dl.so") != NULL)
            unloaded = !(m->flags & MP_HIMG_MAP_LOADED) && m->build_id[0] != '\0';
        if (strstr(m->path, "libhimg-dl-noid.so") != NULL)
            noid_seen = (m->flags & MP_HIMG_MAP_LOADED) && m->build_id[0] == '\0';
    }
    cr_assert(unloaded, "the unloaded module's mapping");
    cr_assert(noid_seen, "the build-id-less module's mapping");
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_himg_pprof_opts o = {.symbolize = MP_PROF_SYMBOLIZE_NONE};
    cr_assert_eq(mp_himg_pprof(img, &o, &buf, &len), MP_PROF_OK);
    tp_profile off;
    cr_assert(tp_decode(buf, len, &off));
    free(buf);
    mp_himg_free(img);
    for (size_t i = 0; i < live.nsamples; i++) {
        const tp_sample *t = find_sample(&off, &live.samples[i], &live);
        cr_assert_not_null(t, "live sample %zu has no twin", i);
        if (tp_label_str(&live, &live.samples[i], "__delta__") == NULL)
            cr_assert_eq(t->values[3], live.samples[i].values[3]);
    }
    tp_free(&live);
    tp_free(&off);
    mp_profiler_free(p);
    tmi_dealloc(a, 4096, 8);
    tmi_dealloc(b, 8192, 8);
    dlclose(noid);
    free(file);
    rm_rf(dir);
}

/* ------------------------------------------- writing while threads churn */

#define WORKERS 4
#define SLOTS   (TEST_SANITIZED ? 512 : 2048)
#define SIZE    4096

static _Atomic int stop_workers;
static _Atomic int workers_full;
static _Atomic uint64_t worker_ops;

void *worker_site(size_t size);
__attribute__((noinline)) void *worker_site(size_t size)
{
    void *p = tmi_alloc(size, 16);
    TEST_NO_TAIL(p);
    return p;
}

/* Keeps SLOTS blocks of SIZE bytes live, replacing one at a time: the live
 * total is SLOTS * SIZE at every instant (minus the one being replaced). */
static void *worker(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    void **slot = calloc(SLOTS, sizeof *slot);
    cr_assert_not_null(slot);
    for (int i = 0; i < SLOTS; i++)
        cr_assert_not_null(slot[i] = worker_site(SIZE));
    atomic_fetch_add(&workers_full, 1);
    while (!atomic_load(&stop_workers)) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t k = rng % SLOTS;
        tmi_dealloc(slot[k], SIZE, 16);
        slot[k] = worker_site(SIZE);
        cr_assert_not_null(slot[k]);
        atomic_fetch_add_explicit(&worker_ops, 1, memory_order_relaxed);
    }
    for (int i = 0; i < SLOTS; i++)
        tmi_dealloc(slot[i], SIZE, 16);
    free(slot);
    return NULL;
}

Test(image, written_while_four_threads_allocate_and_free, .timeout = 300)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "t.mpimg");
    const double interval = 16384;
    mp_prof_config c = test_config((size_t)interval, 11);
    c.ring_capacity = 64; /* handoffs to the overflow shards happen too */
    mp_profiler *p = test_start(&c);
    pthread_t th[WORKERS];
    for (uintptr_t i = 0; i < WORKERS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, worker, (void *)(i + 1)), 0);
    while (atomic_load(&workers_full) < WORKERS) /* every working set is full */
        usleep(1000);

    const double n = (double)WORKERS * SLOTS, pr = test_p(SIZE, interval);
    const double sigma = test_sigma_objects(n, pr);
    int images = TEST_SANITIZED ? 3 : 8;
    uint64_t progressed = 0;
    for (int k = 0; k < images; k++) {
        usleep(20000);
        uint64_t before = atomic_load(&worker_ops);
        cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
        progressed += atomic_load(&worker_ops) - before;
        mp_himg *img = load_ok(file);
        double objects, bytes;
        mp_himg_live_totals(img, &objects, &bytes);
        cr_log_info("image %d: %zu samples, %.0f objects; %llu operations during the write", k,
                    img->nlive, objects, (unsigned long long)(atomic_load(&worker_ops) - before));
        /* WORKERS blocks may be between their free and their allocation */
        cr_assert_lt(fabs(objects - n), TEST_SIGMAS * sigma + WORKERS,
                     "image %d: %.0f live objects estimated, %.0f live (sigma %.1f)", k, objects, n,
                     sigma);
        cr_assert_float_eq(bytes, objects * SIZE, 1e-6 * bytes + 1);
        for (size_t i = 0; i < img->nlive; i++)
            cr_assert_eq(img->live[i].size, SIZE);
        mp_himg_free(img);
        /* and a report of the live process agrees within its estimate */
        tp_profile r;
        test_report(p, &r);
        double rep = (double)test_sum(&r, "inuse_objects", 0);
        cr_assert_lt(fabs(rep - n), TEST_SIGMAS * sigma + WORKERS, "report: %.0f", rep);
        tp_free(&r);
    }
    cr_log_info("worker operations during %d image writes: %llu", images,
                (unsigned long long)progressed);
    mp_himg_timing tm;
    mp_himg_last_timing(&tm);
    cr_assert_gt(tm.live_samples, 0);
    cr_assert_leq(tm.quiet_ns, tm.total_ns);
    atomic_store(&stop_workers, 1);
    for (int i = 0; i < WORKERS; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    mp_profiler_free(p);
    free(file);
    rm_rf(dir);
}

/* ------------------------------------------------------------- refusals */

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_gt(n, 0);
    rewind(f);
    unsigned char *b = malloc((size_t)n);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static char *valid_image(const char *dir)
{
    observe();
    char *file = path_in(dir, "good.mpimg");
    mp_prof_config c = test_config(4096, 5);
    mp_profiler *p = test_start(&c);
    void *keep[50];
    for (int i = 0; i < 50; i++)
        keep[i] = site_live(8192);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    mp_profiler_free(p);
    for (int i = 0; i < 50; i++)
        tmi_dealloc(keep[i], 8192, 8);
    return file;
}

/* The public reader (<mimprof/profiling_image.h>) over the same image:
 * what it says equals the internal reader's, its refusals are typed and
 * carry the sentence, and out-of-range or NULL arguments are refused. */
Test(image, the_public_reader_agrees_with_the_image, .timeout = 60)
{
    char *dir = scratch();
    char *good = valid_image(dir);
    mp_himg *h = load_ok(good);
    mp_prof_image *img = NULL;
    char why[1024] = "";
    cr_assert_eq(mp_prof_image_open(good, &img, why, sizeof why), MP_PROF_OK, "%s", why);
    mp_prof_image_info in;
    mp_prof_image_info_get(img, &in);
    cr_assert_str_eq(in.version, h->version);
    cr_assert_eq(in.pid, h->meta[MP_HIMG_META_PID]);
    cr_assert_eq(in.generation, h->meta[MP_HIMG_META_GENERATION]);
    cr_assert_eq(in.snapshot_ns, h->meta[MP_HIMG_META_SNAPSHOT_NS]);
    cr_assert_eq(in.interval_start_ns, h->meta[MP_HIMG_META_INTERVAL_NS]);
    cr_assert_eq(in.config.sample_interval_bytes, h->cfg.sample_interval_bytes);
    cr_assert_eq(in.live_samples, h->nlive);
    cr_assert_gt(in.live_samples, 0);
    double lo, lb;
    mp_himg_live_totals(h, &lo, &lb);
    cr_assert_eq(in.live_objects, lo);
    cr_assert_eq(in.live_bytes, lb);
    cr_assert_eq(in.stacks, h->nstacks);
    cr_assert_eq(in.mappings, h->nmaps);
    cr_assert_gt(in.mappings, 0);
    for (size_t i = 0; i < in.mappings; i++) {
        mp_prof_image_mapping m;
        cr_assert_eq(mp_prof_image_mapping_get(img, i, &m), MP_PROF_OK);
        cr_assert_str_eq(m.path, h->maps[i].path);
        cr_assert_str_eq(m.build_id, h->maps[i].build_id);
        cr_assert_eq(m.segments, h->maps[i].nsegs);
        cr_assert_eq(m.start, h->maps[i].segs[0].start);
        cr_assert_eq(m.main, (h->maps[i].flags & MP_HIMG_MAP_MAIN) != 0);
        char *f1 = NULL, *f2 = NULL, w1[2048] = "", w2[2048] = "";
        cr_assert_eq((int)mp_prof_image_locate(img, i, NULL, &f1, w1, sizeof w1),
                     (int)mp_himg_locate(&h->maps[i], NULL, &f2, w2, sizeof w2));
        cr_assert((f1 == NULL) == (f2 == NULL));
        if (f1 != NULL)
            cr_assert_str_eq(f1, f2);
        free(f1);
        free(f2);
    }
    mp_prof_image_mapping m;
    cr_assert_eq(mp_prof_image_mapping_get(img, in.mappings, &m), MP_PROF_E_INVALID_CONFIG);
    char *file = (char *)"x";
    cr_assert_eq(mp_prof_image_locate(img, in.mappings, NULL, &file, NULL, 0),
                 MP_PROF_IMAGE_SYMBOLS_NO_FILE);
    cr_assert_null(file);
    /* its pprof is the internal reader's, byte for byte */
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    cr_assert_eq(mp_prof_image_pprof(img, NULL, &a, &alen), MP_PROF_OK);
    cr_assert_eq(mp_himg_pprof(h, NULL, &b, &blen), MP_PROF_OK);
    cr_assert_eq(alen, blen);
    cr_assert_eq(memcmp(a, b, alen), 0);
    mp_prof_buffer_free(a);
    free(b);
    mp_prof_image_pprof_opts bad = {.symbolize = 3};
    cr_assert_eq(mp_prof_image_pprof(img, &bad, &a, &alen), MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_prof_image_pprof(NULL, NULL, &a, &alen), MP_PROF_E_INVALID_CONFIG);
    mp_prof_image_free(img);
    mp_prof_image_free(NULL);
    mp_himg_free(h);

    /* refusals: typed, with the reader's sentence */
    cr_assert_eq(mp_prof_image_open(NULL, &img, why, sizeof why), MP_PROF_E_INVALID_CONFIG);
    char *missing = path_in(dir, "missing.mpimg");
    img = NULL;
    cr_assert_eq(mp_prof_image_open(missing, &img, why, sizeof why), MP_PROF_E_BAD_IMAGE);
    cr_assert_null(img);
    cr_assert_not_null(strstr(why, "cannot open"), "%s", why);
    cr_assert_eq(mp_prof_image_open_memory("not an image", 12, &img, why, sizeof why),
                 MP_PROF_E_BAD_IMAGE);
    cr_assert_null(img);
    cr_assert_str_not_empty(why);
    cr_assert_str_eq(mp_prof_strerror(MP_PROF_E_BAD_IMAGE),
                     "not a heap image this version can read");
    free(missing);
    free(good);
    rm_rf(dir);
}

Test(image, damaged_files_are_refused_with_the_image_packages_sentences, .timeout = 60)
{
    char *dir = scratch();
    char *good = valid_image(dir);
    mp_himg_free(load_ok(good));
    size_t len;
    unsigned char *b = slurp(good, &len);
    char *bad = path_in(dir, "bad.mpimg");

    b[len - 9] ^= 0x40; /* inside the object region or the blob */
    spit(bad, b, len);
    load_refused(bad, mp_img_strerror(MP_IMG_E_CHECKSUM));
    b[len - 9] ^= 0x40;

    spit(bad, b, len / 2);
    load_refused(bad, mp_img_strerror(MP_IMG_E_CORRUPT));

    uint64_t marker = UINT64_C(0x454C504D4F434E49); /* FORMAT.md: incomplete */
    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    memcpy(c + 16, &marker, 8);
    spit(bad, c, len);
    load_refused(bad, mp_img_strerror(MP_IMG_E_INCOMPLETE));

    memcpy(c, b, len);
    memcpy(c + 88, "riscv64\0\0\0\0\0\0\0\0\0", 16); /* the arch field */
    spit(bad, c, len);
    load_refused(bad, "arch");

    spit(bad, (const unsigned char *)"not an image at all, just text\n", 31);
    load_refused(bad, mp_img_strerror(MP_IMG_E_NOT_IMAGE));
    memcpy(c, "GIF89a", 6);
    spit(bad, c, len);
    load_refused(bad, mp_img_strerror(MP_IMG_E_NOT_IMAGE));

    char *none = path_in(dir, "absent.mpimg");
    load_refused(none, mp_img_strerror(MP_IMG_E_IO));
    free(none);
    free(c);
    free(b);
    free(bad);
    free(good);
    rm_rf(dir);
}

/* An image of another program: same library, another type table. */
Test(image, another_programs_image_is_refused_by_its_type_table, .timeout = 60)
{
    char *dir = scratch();
    char *file = path_in(dir, "other.mpimg");
    mp_img_registry *reg;
    const mp_img_type *cons;
    cr_assert_eq(mp_img_registry_new(0, &reg, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_type_register(reg, "cons", &(mp_img_type_options){.spelling = "ref ref"},
                                      &cons, NULL),
                 MP_IMG_OK);
    mp_img_heap *h;
    cr_assert_eq(mp_img_heap_new(reg, &h, NULL), MP_IMG_OK);
    void *o = mp_img_alloc(h, cons, 2);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, o, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_write(h, file, NULL), MP_IMG_OK);
    mp_img_heap_free(h);
    mp_img_registry_free(reg);
    load_refused(file, "type");
    load_refused(file, mp_img_strerror(MP_IMG_E_MISMATCH));
    free(file);
    rm_rf(dir);
}

/* An image naming a library by dlsym is refused before the loader could
 * dlopen it. A writer can only put a dlsym entry in an image whose type
 * table differs from the heap-image schema's (the schema's one foreign
 * unit has the `code` policy, which is part of the table), so this one is
 * refused at the header; a crafted file that keeps the schema's table and
 * adds a dlsym entry is refused by the loading registry's foreign
 * allow-list (code only), which the image package tests word for word
 * (roundtrip::refused_foreign_kinds_name_the_entry). Either way puts is
 * never looked up and no library opened. */
Test(image, dlsym_entries_are_refused_before_loading, .timeout = 60)
{
    char *dir = scratch();
    char *file = path_in(dir, "dl.mpimg");
    mp_img_registry *reg;
    mp_himg_types T;
    cr_assert_eq(mp_himg_registry_new(&reg, &T, NULL), MP_IMG_OK);
    const mp_img_type *fn;
    cr_assert_eq(mp_img_type_register(reg, "fn",
                                      &(mp_img_type_options){.spelling = "foreign",
                                                             .foreign = MP_IMG_FOREIGN_RESOLVE},
                                      &fn, NULL),
                 MP_IMG_OK);
    mp_img_heap *h;
    cr_assert_eq(mp_img_heap_new(reg, &h, NULL), MP_IMG_OK);
    mp_img_word *o = mp_img_alloc(h, fn, 1);
    o[0] = (mp_img_word)dlsym(RTLD_DEFAULT, "puts");
    cr_assert_neq(o[0], 0);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, o, NULL), MP_IMG_OK);
    mp_img_error e;
    cr_assert_eq(mp_img_write(h, file, &e), MP_IMG_OK, "%s", e.detail);
    mp_img_heap_free(h);
    mp_img_registry_free(reg);
    load_refused(file, "type table");
    free(file);
    rm_rf(dir);
}

/* Well-formed images of the schema's registry that are not heap images. */
static void write_heap(const char *file, void (*fill)(mp_img_heap *, const mp_himg_types *))
{
    mp_img_registry *reg;
    mp_himg_types T;
    cr_assert_eq(mp_himg_registry_new(&reg, &T, NULL), MP_IMG_OK);
    mp_img_heap *h;
    cr_assert_eq(mp_img_heap_new(reg, &h, NULL), MP_IMG_OK);
    fill(h, &T);
    mp_img_error e;
    cr_assert_eq(mp_img_write(h, file, &e), MP_IMG_OK, "%s", e.detail);
    mp_img_heap_free(h);
    mp_img_registry_free(reg);
}

static mp_img_word *words_n(mp_img_heap *h, const mp_himg_types *T, size_t n)
{
    mp_img_word *w = mp_img_alloc(h, T->t[MP_HIMG_T_WORDS], 1 + n);
    cr_assert_not_null(w);
    return w;
}

static mp_img_word *refs_n(mp_img_heap *h, const mp_himg_types *T, size_t n)
{
    mp_img_word *w = mp_img_alloc(h, T->t[MP_HIMG_T_REFS], 1 + n);
    cr_assert_not_null(w);
    return w;
}

/* meta, version, config and counters of a plausible image with `nlive`
 * samples on `nstacks` stacks; the caller adds the rest. */
static void base_roots(mp_img_heap *h, const mp_himg_types *T, size_t nlive, size_t nstacks)
{
    mp_img_word *meta = words_n(h, T, MP_HIMG_META_COUNT);
    meta[1 + MP_HIMG_META_SCHEMA] = MP_HIMG_SCHEMA;
    meta[1 + MP_HIMG_META_NLIVE] = nlive;
    meta[1 + MP_HIMG_META_NSTACKS] = nstacks;
    mp_img_word *cfg = words_n(h, T, MP_HIMG_CFG_COUNT);
    cfg[1 + MP_HIMG_CFG_INTERVAL] = 4096;
    cfg[1 + MP_HIMG_CFG_MAX_DEPTH] = 64;
    mp_img_word *ver = mp_img_alloc(h, T->t[MP_HIMG_T_STR], 2);
    ver[0] = 5;
    ver[1] = (mp_img_word) "0.1.0";
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_META, meta, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_CONFIG, cfg, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_COUNTERS, words_n(h, T, MP_HIMG_CTR_COUNT), NULL),
                 MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_VERSION, ver, NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_MAPPINGS, refs_n(h, T, 0), NULL), MP_IMG_OK);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_INTERVAL, refs_n(h, T, 0), NULL), MP_IMG_OK);
}

static void fill_no_live(mp_img_heap *h, const mp_himg_types *T) { base_roots(h, T, 0, 0); }

/* A live entry of one sample of `weight` on `stack`. */
static mp_img_word *one_sample(mp_img_heap *h, const mp_himg_types *T, void *stack, double weight)
{
    mp_img_word *g = mp_img_alloc(h, T->t[MP_HIMG_T_LIVE], MP_HIMG_LIVE_UNITS);
    mp_img_word *w = words_n(h, T, MP_HIMG_SAMPLE_WORDS);
    w[1] = 64;
    memcpy(&w[2], &weight, sizeof weight);
    g[0] = (mp_img_word)stack;
    g[1] = (mp_img_word)w;
    mp_img_word *live = refs_n(h, T, 1);
    live[1] = (mp_img_word)g;
    return live;
}

static void fill_frame_without_mapping(mp_img_heap *h, const mp_himg_types *T)
{
    base_roots(h, T, 1, 1);
    mp_img_word *stack = mp_img_alloc(h, T->t[MP_HIMG_T_STACK], MP_HIMG_STACK_HEAD + 1);
    stack[MP_HIMG_STACK_HEAD] = (mp_img_word)&puts; /* code in libc: no mapping of the image */
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, one_sample(h, T, stack, 1.0), NULL),
                 MP_IMG_OK);
}

static void fill_bad_weight(mp_img_heap *h, const mp_himg_types *T)
{
    base_roots(h, T, 1, 1);
    mp_img_word *stack = mp_img_alloc(h, T->t[MP_HIMG_T_STACK], MP_HIMG_STACK_HEAD);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, one_sample(h, T, stack, -1.0), NULL),
                 MP_IMG_OK);
}

static void fill_sample_is_words(mp_img_heap *h, const mp_himg_types *T)
{
    base_roots(h, T, 1, 0);
    mp_img_word *live = refs_n(h, T, 1);
    live[1] = (mp_img_word)words_n(h, T, 4);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, live, NULL), MP_IMG_OK);
}

static void fill_too_many_samples(mp_img_heap *h, const mp_himg_types *T)
{
    base_roots(h, T, 0, 1);
    mp_img_word *stack = mp_img_alloc(h, T->t[MP_HIMG_T_STACK], MP_HIMG_STACK_HEAD);
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, one_sample(h, T, stack, 1.0), NULL),
                 MP_IMG_OK);
}

Test(image, files_of_the_schema_that_are_not_heap_images_are_refused, .timeout = 60)
{
    char *dir = scratch();
    char *file = path_in(dir, "s.mpimg");
    write_heap(file, fill_no_live);
    load_refused(file, "no root 'mimprof.live'");
    write_heap(file, fill_frame_without_mapping);
    load_refused(file, "no mapping of the image holds");
    write_heap(file, fill_bad_weight);
    load_refused(file, "weight");
    write_heap(file, fill_sample_is_words);
    load_refused(file, "is not a stack's samples");
    write_heap(file, fill_too_many_samples);
    load_refused(file, "more live samples than");
    free(file);
    rm_rf(dir);
}

/* Ages survive the image: each sample's age at the snapshot is in the
 * file (schema 2), and the image's pprof labels by it. */
Test(image, ages_are_kept_in_the_image, .timeout = 60)
{
    observe();
    char *dir = scratch();
    char *file = path_in(dir, "age.mpimg");
    mp_prof_config c = test_config(1, 21);
    mp_profiler *p = test_start(&c);
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = site_live(1000);
    sleep_ms(3200);
    cr_assert_eq(mp_profiler_write_image(p, file), MP_PROF_OK);
    mp_himg *img = load_ok(file);
    cr_assert_eq(img->meta[MP_HIMG_META_SCHEMA], MP_HIMG_SCHEMA);
    size_t old = 0;
    for (size_t i = 0; i < img->nlive; i++)
        if (img->live[i].size == 1000) {
            cr_assert_geq(img->live[i].age_ns, 3200000000ull);
            cr_assert_neq(img->live[i].age_ns, MP_HIMG_AGE_UNKNOWN);
            old++;
        }
    cr_assert_eq(old, 100);
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_himg_pprof_opts o = {.symbolize = -1};
    cr_assert_eq(mp_himg_pprof(img, &o, &buf, &len), MP_PROF_OK);
    tp_profile pp;
    cr_assert(tp_decode(buf, len, &pp));
    free(buf);
    int objs = tp_type_index(&pp, "inuse_objects");
    int64_t labelled = 0;
    for (size_t i = 0; i < pp.nsamples; i++) {
        int64_t age;
        const char *unit;
        if (pp.samples[i].values[objs] == 0)
            continue;
        cr_assert(tp_label_num(&pp, &pp.samples[i], "age", &age, &unit));
        cr_assert_str_eq(unit, "seconds");
        if (age >= 3)
            labelled += pp.samples[i].values[objs];
    }
    cr_assert_geq(labelled, 100);
    tp_free(&pp);
    mp_himg_free(img);
    mp_profiler_free(p);
    for (int i = 0; i < 100; i++)
        tmi_dealloc(keep[i], 1000, 8);
    free(file);
    rm_rf(dir);
}

/* An image of schema 1 (before ages): three words per sample, read with
 * ages unknown, its pprof without age labels. */
static void fill_schema_1(mp_img_heap *h, const mp_himg_types *T)
{
    base_roots(h, T, 2, 1);
    mp_img_word *meta = mp_img_root_get(h, MP_HIMG_ROOT_META);
    cr_assert_not_null(meta);
    meta[1 + MP_HIMG_META_SCHEMA] = MP_HIMG_SCHEMA_V1;
    mp_img_word *stack = mp_img_alloc(h, T->t[MP_HIMG_T_STACK], MP_HIMG_STACK_HEAD);
    mp_img_word *g = mp_img_alloc(h, T->t[MP_HIMG_T_LIVE], MP_HIMG_LIVE_UNITS);
    mp_img_word *w = words_n(h, T, 2 * MP_HIMG_SAMPLE_WORDS_V1);
    double weight = 2.0;
    for (int k = 0; k < 2; k++) {
        w[1 + 3 * k] = 64;
        memcpy(&w[2 + 3 * k], &weight, sizeof weight);
    }
    g[0] = (mp_img_word)stack;
    g[1] = (mp_img_word)w;
    mp_img_word *live = refs_n(h, T, 1);
    live[1] = (mp_img_word)g;
    cr_assert_eq(mp_img_root_set(h, MP_HIMG_ROOT_LIVE, live, NULL), MP_IMG_OK);
}

static void fill_schema_3(mp_img_heap *h, const mp_himg_types *T)
{
    fill_schema_1(h, T);
    mp_img_word *meta = mp_img_root_get(h, MP_HIMG_ROOT_META);
    meta[1 + MP_HIMG_META_SCHEMA] = 3;
}

Test(image, schema_1_images_are_read_without_ages, .timeout = 60)
{
    char *dir = scratch();
    char *file = path_in(dir, "v1.mpimg");
    write_heap(file, fill_schema_1);
    mp_himg *img = load_ok(file);
    cr_assert_eq(img->nlive, 2);
    cr_assert_eq(img->live[0].age_ns, MP_HIMG_AGE_UNKNOWN);
    cr_assert_eq(img->live[1].size, 64);
    uint8_t *buf = NULL;
    size_t len = 0;
    mp_himg_pprof_opts o = {.symbolize = MP_PROF_SYMBOLIZE_NONE};
    cr_assert_eq(mp_himg_pprof(img, &o, &buf, &len), MP_PROF_OK);
    tp_profile pp;
    cr_assert(tp_decode(buf, len, &pp));
    free(buf);
    cr_assert_eq(pp.nsamples, 1);
    int64_t age;
    const char *unit;
    cr_assert(!tp_label_num(&pp, &pp.samples[0], "age", &age, &unit));
    cr_assert_eq(pp.samples[0].values[tp_type_index(&pp, "inuse_space")], 256);
    tp_free(&pp);
    mp_himg_free(img);
    /* A schema this reader does not know is refused by name. */
    write_heap(file, fill_schema_3);
    load_refused(file, "heap image schema 3; this reader knows schemas 1 and 2");
    free(file);
    rm_rf(dir);
}
