/* SPDX-License-Identifier: MIT */
/* Ages of live objects and the memory reconciliation of every report:
 * the age buckets (src/age.c), the builder's age labels and comments,
 * ages through a session (old against young, cross-thread frees, fork),
 * and the "memory ..." comments adding up as src/reconcile.c says.
 *
 * The session tests sleep (nanosleep: no CPU, no speed assumption) so
 * that old objects are at least OLD_NS old at the report; they assert
 * lower bounds on ages, which no slowness of the machine can break, and
 * that younger objects are not labelled older than older ones. */
#include "helpers.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mimprof/sys.h>

#include "age.h"
#include "report_builder.h"

MP_PROF_SAMPLING_ALLOCATOR_INLINE(tmi, mp_sys_mimalloc);

#define S      1000000000ull
#define OLD_NS (3 * S + S / 5) /* past the 3s bound */

/* ---------------------------------------------------------------- buckets */

Test(age, buckets_are_the_documented_bounds)
{
    static const int64_t bounds[MP_AGE_BUCKETS] = {
        0,    1,    3,        10,       30,        60,    180,       600,
        1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400,
    };
    for (unsigned b = 0; b < MP_AGE_BUCKETS; b++) {
        cr_assert_eq(mp_age_bucket_seconds(b), bounds[b], "bucket %u", b);
        uint64_t at = (uint64_t)bounds[b] * S;
        cr_assert_eq(mp_age_bucket(at), b, "age %llu ns", (unsigned long long)at);
        if (b > 0)
            cr_assert_eq(mp_age_bucket(at - 1), b - 1, "just below bound %u", b);
    }
    cr_assert_eq(mp_age_bucket(UINT64_MAX), MP_AGE_BUCKETS - 1);
    cr_assert_eq(mp_age_bucket_seconds(MP_AGE_BUCKETS), -1);
    cr_assert_eq(mp_age_bucket_seconds(MP_AGE_NONE), -1);
}

Test(age, buckets_never_decrease_with_age)
{
    unsigned last = 0;
    for (uint64_t ns = 0; ns < 8 * 86400 * S; ns = ns * 5 / 4 + 999) {
        unsigned b = mp_age_bucket(ns);
        cr_assert_geq(b, last, "age %llu", (unsigned long long)ns);
        cr_assert_leq((uint64_t)mp_age_bucket_seconds(b) * S, ns);
        last = b;
    }
}

/* ---------------------------------------------------------------- builder */

static mp_report_builder *builder(void)
{
    static mp_report_cache *cache;
    if (cache == NULL)
        cache = mp_report_cache_new();
    mp_report_options opt = {.period = 4096, .symbolize = MP_PROF_SYMBOLIZE_NONE};
    mp_report_builder *b = mp_report_begin(cache, &opt);
    cr_assert_not_null(b);
    return b;
}

static void finish(mp_report_builder *b, tp_profile *out)
{
    uint8_t *buf;
    size_t len;
    cr_assert_eq(mp_report_finish(b, &buf, &len), MP_PROF_OK);
    cr_assert(tp_decode(buf, len, out));
    free(buf);
}

Test(age, builder_sums_per_bucket_and_labels_in_use_samples_only)
{
    uintptr_t pcs[2] = {0x1000, 0x2000};
    double v_live[MP_VAL_COUNT] = {0, 0, 1, 100};
    double v_int[MP_VAL_COUNT] = {1, 100, 0, 0};
    mp_report_builder *b = builder();
    cr_assert_eq(mp_report_add_aged(b, pcs, 2, false, v_live, false, 0), MP_PROF_OK);
    cr_assert_eq(mp_report_add_aged(b, pcs, 2, false, v_live, false, 7), MP_PROF_OK);
    cr_assert_eq(mp_report_add_aged(b, pcs, 2, false, v_live, false, 7), MP_PROF_OK);
    cr_assert_eq(mp_report_add(b, pcs, 2, false, v_int, true), MP_PROF_OK);
    cr_assert_eq(mp_report_add_aged(b, pcs, 2, false, v_int, true, 3), MP_PROF_E_INTERNAL,
                 "an allocation sample has no age");
    cr_assert_eq(mp_report_add_aged(b, pcs, 2, false, v_live, false, MP_AGE_BUCKETS),
                 MP_PROF_E_INTERNAL);
    tp_profile p;
    finish(b, &p);
    cr_assert_eq(p.nsamples, 3);
    int space = tp_type_index(&p, "inuse_space");
    int seen = 0;
    for (size_t i = 0; i < p.nsamples; i++) {
        const tp_sample *s = &p.samples[i];
        int64_t num;
        const char *unit;
        bool aged = tp_label_num(&p, s, "age", &num, &unit);
        if (tp_label_str(&p, s, "__delta__") != NULL) {
            cr_assert(!aged, "an allocation sample carries an age");
            continue;
        }
        cr_assert(aged);
        cr_assert_str_eq(unit, "seconds");
        if (num == 0) {
            cr_assert_eq(s->values[space], 100);
            seen |= 1;
        } else {
            cr_assert_eq(num, 600, "bucket 7 is 10m");
            cr_assert_eq(s->values[space], 200, "equal (stack, bucket) summed");
            seen |= 2;
        }
    }
    cr_assert_eq(seen, 3);
    tp_free(&p);
}

Test(age, builder_keeps_comments_in_order)
{
    mp_report_builder *b = builder();
    cr_assert_eq(mp_report_comment(b, "first"), MP_PROF_OK);
    cr_assert_eq(mp_report_comment(b, "second"), MP_PROF_OK);
    cr_assert_eq(mp_report_comment(b, NULL), MP_PROF_E_INTERNAL);
    tp_profile p;
    finish(b, &p);
    cr_assert_eq(p.ncomments, 2);
    cr_assert_str_eq(tp_str(&p, (int64_t)p.comments[0]), "first");
    cr_assert_str_eq(tp_str(&p, (int64_t)p.comments[1]), "second");
    tp_free(&p);
}

/* ---------------------------------------------------------------- session */

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / S), (long)(ns % S)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

enum { OLD_SIZE = 1000, YOUNG_SIZE = 3000, N = 200 };

/* Per report: the smallest age label (seconds) of the in-use samples of
 * blocks of `size` bytes (identified by in-use bytes per object: with an
 * interval of 1 byte every block is sampled with weight 1), the largest,
 * and their objects. -1 when there are none. */
typedef struct ages {
    int64_t min_s, max_s, objects;
} ages;

static ages ages_of(const tp_profile *p, int64_t size)
{
    int objs = tp_type_index(p, "inuse_objects"), space = tp_type_index(p, "inuse_space");
    ages a = {-1, -1, 0};
    for (size_t i = 0; i < p->nsamples; i++) {
        const tp_sample *s = &p->samples[i];
        if (s->values[objs] == 0 || s->values[space] / s->values[objs] != size)
            continue;
        int64_t num;
        const char *unit;
        cr_assert(tp_label_num(p, s, "age", &num, &unit), "an in-use sample without age");
        cr_assert_str_eq(unit, "seconds");
        a.min_s = a.min_s < 0 || num < a.min_s ? num : a.min_s;
        a.max_s = num > a.max_s ? num : a.max_s;
        a.objects += s->values[objs];
    }
    return a;
}

static void **alloc_n(size_t size)
{
    void **v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++)
        cr_assert_not_null(v[i] = tmi_alloc(size, 8));
    return v;
}

/* Frees v[first], v[first + step], ... (blocks of `size`); the array too
 * when first is 0 and step 1. */
static void free_n(void **v, size_t size, int first, int step)
{
    for (int i = first; i < N; i += step)
        tmi_dealloc(v[i], size, 8);
    if (first == 0 && step == 1)
        free(v);
}

/* A session sampling every byte (seed `seed`) holding N old blocks, at
 * least OLD_NS old when this returns. */
static void **start_with_old(uint64_t seed, mp_profiler **p)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(1, seed);
    *p = test_start(&c);
    void **old = alloc_n(OLD_SIZE);
    sleep_ns(OLD_NS);
    return old;
}

Test(age, old_and_young_objects_carry_their_ages, .timeout = 60)
{
    mp_profiler *p;
    void **old = start_with_old(11, &p);
    void **young = alloc_n(YOUNG_SIZE);
    tp_profile r;
    test_report(p, &r);
    ages o = ages_of(&r, OLD_SIZE), y = ages_of(&r, YOUNG_SIZE);
    cr_assert_eq(o.objects, N);
    cr_assert_eq(y.objects, N);
    cr_assert_geq(o.min_s, 3, "objects %llu ns old labelled %lld s", OLD_NS, (long long)o.min_s);
    cr_assert_leq(y.max_s, o.min_s, "young objects labelled older than old ones");
    for (size_t i = 0; i < r.nsamples; i++) { /* allocation samples: no age */
        int64_t num;
        const char *unit;
        if (tp_label_str(&r, &r.samples[i], "__delta__") != NULL)
            cr_assert(!tp_label_num(&r, &r.samples[i], "age", &num, &unit));
    }
    tp_free(&r);
    /* A later report: ages grew, the old ones stay old. */
    test_report(p, &r);
    cr_assert_geq(ages_of(&r, OLD_SIZE).min_s, 3);
    tp_free(&r);
    free_n(old, OLD_SIZE, 0, 1);
    free_n(young, YOUNG_SIZE, 0, 1);
    mp_profiler_free(p);
}

static void *free_half(void *arg)
{
    free_n(arg, OLD_SIZE, 0, 2);
    return NULL;
}

Test(age, ages_survive_cross_thread_frees, .timeout = 60)
{
    mp_profiler *p;
    void **old = start_with_old(12, &p);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_half, old), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    tp_profile r;
    test_report(p, &r);
    ages o = ages_of(&r, OLD_SIZE);
    cr_assert_eq(o.objects, N / 2);
    cr_assert_geq(o.min_s, 3);
    tp_free(&r);
    free_n(old, OLD_SIZE, 1, 2);
    free(old);
    mp_profiler_free(p);
}

/* fork: the parent's samples keep their ages across the fork, in the
 * parent and in the child, whose new session reports the blocks it
 * inherited with the ages the parent sampled them at (the clock is
 * system-wide), and measures its own samples' ages on the same clock. */
Test(age, ages_survive_fork, .timeout = 60)
{
    mp_profiler *p;
    void **old = start_with_old(13, &p);
    mp_prof_config c = test_config(1, 13);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        mp_profiler *q = NULL;
        if (mp_profiler_start(&c, &q) != MP_PROF_OK)
            _exit(10);
        void *keep = tmi_alloc(YOUNG_SIZE, 8);
        sleep_ns(S + S / 5);
        uint8_t *buf;
        size_t len;
        tp_profile r;
        if (mp_profiler_report(q, &buf, &len) != MP_PROF_OK || !tp_decode(buf, len, &r))
            _exit(11);
        int objs = tp_type_index(&r, "inuse_objects"), space = tp_type_index(&r, "inuse_space");
        int64_t young = 0, inherited = 0;
        for (size_t i = 0; i < r.nsamples; i++) {
            int64_t num, o = r.samples[i].values[objs];
            const char *unit;
            if (o == 0 || !tp_label_num(&r, &r.samples[i], "age", &num, &unit))
                continue;
            if (r.samples[i].values[space] == o * YOUNG_SIZE)
                young += num >= 1 && num < 3 ? o : 0; /* >= 1.2 s old, not the parent's 4.4 s */
            else if (r.samples[i].values[space] == o * OLD_SIZE)
                inherited += num >= 3 ? o : 0; /* the parent's blocks: >= 4.4 s old */
        }
        _exit(young == 1 && inherited == N ? 0 : 12);
        (void)keep;
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    tp_profile r;
    test_report(p, &r);
    ages o = ages_of(&r, OLD_SIZE);
    cr_assert_eq(o.objects, N);
    cr_assert_geq(o.min_s, 3);
    tp_free(&r);
    free_n(old, OLD_SIZE, 0, 1);
    mp_profiler_free(p);
}

/* ---------------------------------------------------------- reconciliation */

static bool fake_stats(void *ctx, mp_prof_allocator_stats *out)
{
    (void)ctx;
    out->allocated = 1000;
    out->resident = (uint64_t)64 << 20;
    return true;
}

static bool committed_stats(void *ctx, mp_prof_allocator_stats *out)
{
    (void)ctx;
    out->committed = (uint64_t)1 << 40;
    return true;
}

/* The value after `key` in the comment that starts with `prefix`. */
static bool comment_num(const tp_profile *p, const char *prefix, const char *key, long long *v)
{
    for (size_t i = 0; i < p->ncomments; i++) {
        const char *c = tp_str(p, (int64_t)p->comments[i]);
        if (strncmp(c, prefix, strlen(prefix)) != 0)
            continue;
        const char *k = strstr(c, key);
        return k != NULL && sscanf(k + strlen(key), "%lld", v) == 1;
    }
    return false;
}

/* Whether a comment starts with `prefix`. */
static bool has_comment(const tp_profile *p, const char *prefix)
{
    for (size_t i = 0; i < p->ncomments; i++)
        if (strncmp(tp_str(p, (int64_t)p->comments[i]), prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

Test(age, every_report_reconciles_rss_and_the_parts_add_up, .timeout = 60)
{
    tmi_dealloc(tmi_alloc(16, 8), 16, 8);
    mp_prof_config c = test_config(4096, 14);
    mp_profiler *p = test_start(&c);
    cr_assert_eq(mp_profiler_set_allocator_stats(p, NULL, fake_stats, NULL),
                 MP_PROF_E_INVALID_CONFIG);
    cr_assert_eq(mp_profiler_set_allocator_stats(p, "fake", fake_stats, NULL), MP_PROF_OK);
    void **keep = alloc_n(1 << 16); /* 12.5 MiB, written: resident */
    for (int i = 0; i < N; i++)
        memset(keep[i], 1, 1 << 16);
    tp_profile r;
    test_report(p, &r);
    long long rss, live, prof, rest, slack, outside, alloc;
    cr_assert(comment_num(&r, "memory rss:", "memory rss: ", &rss));
    cr_assert(comment_num(&r, "memory allocator:", "resident=", &alloc));
    cr_assert_eq(alloc, 64ll << 20);
    cr_assert(comment_num(&r, "memory allocator:", "fake allocated=", &alloc));
    cr_assert_eq(alloc, 1000);
    cr_assert(comment_num(&r, "memory live heap:", "memory live heap: ", &live));
    cr_assert(comment_num(&r, "memory profiler:", "memory profiler: ", &prof));
    cr_assert(comment_num(&r, "memory unexplained:", "memory unexplained: ", &rest));
    cr_assert(comment_num(&r, "memory unexplained =", "slack ", &slack));
    cr_assert(comment_num(&r, "memory unexplained =", "outside the allocator ", &outside));
    cr_assert_eq(live, test_sum(&r, "inuse_space", 0), "live heap = the sum of inuse_space");
    cr_assert_gt(prof, 0);
    cr_assert_geq(rss, live, "the held memory is resident");
    cr_assert_eq(rest, rss - live - prof);
    /* The allocator's resident bytes are read before RSS; more than RSS
     * (the fake's fixed figure in a small process) is taken as RSS, so
     * that nothing outside the allocator is ever below zero. */
    long long a = rss < (64ll << 20) ? rss : (64ll << 20);
    cr_assert_eq(slack, a - live - prof);
    cr_assert_eq(outside, rss - a);
    cr_assert_geq(outside, 0);
    cr_assert_eq(slack + outside, rest);
    tp_free(&r);
    /* A committed figure alone does not split the rest: committed memory
     * is not resident memory. */
    cr_assert_eq(mp_profiler_set_allocator_stats(p, "fake", committed_stats, NULL), MP_PROF_OK);
    test_report(p, &r);
    cr_assert(!comment_num(&r, "memory unexplained =", "slack ", &slack));
    cr_assert(comment_num(&r, "memory allocator:", "committed=", &alloc));
    cr_assert(has_comment(&r, "memory unexplained not split: "));
    tp_free(&r);
    /* Without a hook: no allocator figures, the rest unsplit. */
    cr_assert_eq(mp_profiler_set_allocator_stats(p, NULL, NULL, NULL), MP_PROF_OK);
    test_report(p, &r);
    cr_assert(!comment_num(&r, "memory unexplained =", "slack ", &slack));
    cr_assert(comment_num(&r, "memory unexplained:", "memory unexplained: ", &rest));
    tp_free(&r);
    free_n(keep, 1 << 16, 0, 1);
    mp_profiler_stop(p);
    cr_assert_eq(mp_profiler_set_allocator_stats(p, "fake", fake_stats, NULL), MP_PROF_E_INACTIVE);
    mp_profiler_free(p);
}
